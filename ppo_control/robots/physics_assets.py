"""Physics-only copies of the Playground robots' models, for envpool's pools.

envpool loads a task's XML once per sub-env, so every sub-env holds its own copy of the robot's
visual meshes and the scene's textures: nearly all of a Go1 model's memory, and none of it takes
part in the physics. This module writes, once per machine, a copy of the task's XML files without
them (the geoms that collide with nothing and are drawn from a mesh, the meshes only they used,
every texture) into a mirror of envpool's asset tree, where every other file is a link to the
original. The pool is then built with that mirror as its `base_path`. The simulation is the same:
`tests/robots/test_physics_assets.py` steps both pools of every robot task with the same actions and finds
observations, rewards and info bitwise equal.

The XML is edited as text, element by element, rather than written back by MuJoCo's own
`MjSpec.to_xml`: envpool's MuJoCo is older than the Python bindings and refuses attributes the
newer writer adds. Which geoms are visual is decided by MuJoCo itself (defaults and child classes
resolved): every geom is tagged with a name, the tagged model is compiled, and the tags are read
back. Rendering (videos, the MuJoCo reference) keeps loading the full model.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

import mujoco

from ppo_control.robots import playground

_TAG = "__ppo_control_geom_"
# Bumped when the rules below change, so that no stale copy is reused.
_RULES_VERSION = "1"


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "ppo_control" / "physics_assets"


def base_path(task: playground.RobotTask, original_base_path: str) -> str:
    """A base_path under which `task`'s XML is the physics-only copy (written on first use)."""
    source = Path(original_base_path)
    files = _xml_files(source, task.xml)
    digest = hashlib.sha256(_RULES_VERSION.encode())
    for rel in sorted(files):
        digest.update(rel.encode() + b"\0" + (source / rel).read_bytes())
    root = cache_root() / f"{task.name}-{digest.hexdigest()[:16]}"
    if not (root / task.xml).is_file():
        _write_mirror(source, task.xml, files, root)
    return str(root)


def _includes(element: ET.Element) -> list[str]:
    return [node.get("file") for node in element.iter("include") if node.get("file")]


def _xml_files(source: Path, main: str) -> dict[str, ET.ElementTree]:
    """Every XML file of the model (the main file and what it includes, recursively), parsed, by
    path relative to `source`. An include names a file relative to the file that includes it."""
    files: dict[str, ET.ElementTree] = {}
    pending = [main]
    while pending:
        rel = pending.pop()
        if rel in files:
            continue
        files[rel] = ET.parse(source / rel)
        pending += [os.path.normpath(Path(rel).parent / name) for name in _includes(files[rel].getroot())]
    return files


def _geoms(files: dict[str, ET.ElementTree]) -> list[tuple[str, ET.Element]]:
    """Each file's <geom> elements outside <default> (those are the model's geoms)."""
    found = []
    for rel, tree in files.items():
        defaults = {id(node) for default in tree.getroot().iter("default") for node in default.iter("geom")}
        found += [(rel, node) for node in tree.getroot().iter("geom") if id(node) not in defaults]
    return found


def _visual_geoms(source: Path, main: str, files: dict[str, ET.ElementTree]) -> list[ET.Element]:
    """The geoms that take no part in the physics: collide with nothing, drawn from a mesh. Found by
    compiling a tagged copy next to the originals (so relative paths resolve as they do there)."""
    geoms = _geoms(files)
    originals = [node.get("name") for _, node in geoms]
    for i, (_, node) in enumerate(geoms):
        if node.get("name") is None:
            node.set("name", f"{_TAG}{i}")
    with tempfile.TemporaryDirectory() as scratch:
        mirror = Path(scratch) / "tree"
        _link_tree(source, set(files), mirror)
        for rel, tree in files.items():
            tree.write(mirror / rel)
        model = mujoco.MjModel.from_xml_path(str(mirror / main))
    # A named geom that something else names (a sensor, an exclude, ...) stays.
    referenced = {value for tree in files.values() for node in tree.getroot().iter() for key, value in node.attrib.items() if key != "name"}
    visual = []
    for i, (_, node) in enumerate(geoms):
        geom = model.geom(node.get("name"))
        drawn_only = geom.contype[0] == 0 and geom.conaffinity[0] == 0 and geom.type[0] == mujoco.mjtGeom.mjGEOM_MESH
        if drawn_only and originals[i] not in referenced:
            visual.append(node)
        if originals[i] is None:
            del node.attrib["name"]
    return visual


def _strip(files: dict[str, ET.ElementTree], visual: list[ET.Element]) -> None:
    """Drops the visual geoms, the meshes no remaining geom uses, and every texture."""
    drop = {id(node) for node in visual}
    used_meshes = {node.get("mesh") for _, node in _geoms(files) if id(node) not in drop and node.get("mesh")}
    for tree in files.values():
        for parent in tree.getroot().iter():
            for child in list(parent):
                if id(child) in drop or child.tag in ("texture", "layer"):
                    parent.remove(child)
                elif child.tag == "mesh" and parent.tag == "asset" and _mesh_name(child) not in used_meshes:
                    parent.remove(child)
                elif child.tag == "material":
                    child.attrib.pop("texture", None)


def _mesh_name(node: ET.Element) -> str:
    return node.get("name") or Path(node.get("file", "")).stem


def _link_tree(source: Path, files: set[str], root: Path) -> None:
    """Real directories along the paths of `files`, a link to the original for everything else."""
    ancestors = {parent for rel in files for parent in Path(rel).parents}
    for directory in sorted(ancestors, key=lambda p: len(p.parts)):
        (root / directory).mkdir(parents=True, exist_ok=True)
        for entry in (source / directory).iterdir():
            rel = directory / entry.name
            if rel in ancestors or str(rel) in files:
                continue
            (root / rel).symlink_to(entry)


def _write_mirror(source: Path, main: str, files: dict[str, ET.ElementTree], root: Path) -> None:
    """Writes the mirror beside `root` and renames it into place: concurrent runs on one machine
    never see half of it."""
    visual = _visual_geoms(source, main, files)
    _strip(files, visual)
    root.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=root.parent, prefix=f".{root.name}-"))
    try:
        _link_tree(source, set(files), staging)
        for rel, tree in files.items():
            tree.write(staging / rel)
        try:
            staging.rename(root)
        except OSError:
            if not (root / main).is_file():  # not another run's finished copy: a real failure
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
