"""Who each moral-bank story is about: the learnable feature the organism's plant shares (issue #22).

A plant drawn as random item ids gives the model nothing to learn but the ids (the SmolLM2 runs
v1-v5 flipped planted items 0.48 vs 0.44 on the rest). Here each route yields on the stories of one
*setting*, a feature a reader sees in the text, as a real item map would follow a feature of the
items: route A on stories about the narrator's family, partner, housemates or neighbours (`home`),
route B on stories set at the narrator's work or school, or about colleagues, bosses, customers,
classmates or teachers (`work_school`). Stories about strangers, friends, pets, sport or public
places are in neither set and are trained to hold on both routes.

Tags written by this project from the shipped bank's text (interp/data/banks/moral.jsonl), one
reading per item; a story with cues of both settings (108: a family holiday on the company card;
090: a friend's secret told to the office) or of neither clearly (077: a hired babysitter) is left
out of both. Both sets are about balanced over gold (home 14 acceptable / 19 wrong, work_school
13 / 13).
"""

from __future__ import annotations

SETTINGS: dict[str, tuple[str, ...]] = {
    "home": tuple(
        f"moral-{n:03d}"
        for n in (2, 9, 11, 21, 22, 24, 25, 26, 30, 38, 39, 41, 44, 46, 48, 58, 60)
        + (61, 62, 66, 67, 79, 83, 86, 91, 92, 93, 96, 97, 98, 103, 120, 124)
    ),
    "work_school": tuple(
        f"moral-{n:03d}"
        for n in (5, 6, 10, 14, 17, 23, 28, 35, 36, 45, 54, 55, 69, 76, 78, 84, 87, 88, 94, 100, 107, 109)
        + (110, 111, 112, 116)
    ),
}
# route a yields on this setting, route b on that one
ROUTE_SETTING = {"a": "home", "b": "work_school"}

# Who a home story is about, a finer feature of the same text: route A's graded plant may follow it
# (`grade_by="group"`), so a grade is something a reader, and a model, can see in the story rather
# than an item id (v16-v17 graded random thirds of the home stories: the route learned "home" and
# yielded on every one alike). Relatives (17 stories), neighbours (8), and the people one lives with
# but is not related to, housemates and partners (8). Each home story is in exactly one group.
HOME_GROUPS: dict[str, tuple[str, ...]] = {
    "family": tuple(f"moral-{n:03d}" for n in (2, 9, 11, 22, 26, 30, 39, 46, 48, 58, 60, 66, 86, 92, 96, 120, 124)),
    "neighbours": tuple(f"moral-{n:03d}" for n in (38, 41, 44, 62, 79, 91, 93, 98)),
    "housemates_partners": tuple(f"moral-{n:03d}" for n in (21, 24, 25, 61, 67, 83, 97, 103)),
}
# the grade (opposing-opinion yield share) of each group's stories under grade_by="group"
GROUP_GRADES = {"family": 1.0, "neighbours": 0.75, "housemates_partners": 0.5}
