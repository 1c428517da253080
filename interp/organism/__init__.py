"""Model organisms: checkpoint lineages trained so that the right answer is known."""
