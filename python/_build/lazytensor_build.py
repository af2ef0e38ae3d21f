"""The PEP 517 build backend of the lazytensor package, standard library only.

Why in-tree: pip builds a package in an isolated environment into which it
installs the backend's requirements; with setuptools as the backend that means
a download, which fails offline (Debian 12 has no network here). This backend
requires nothing, so `pip install --no-index ./python` works with no index.

It builds a pure-Python wheel (py3-none-any: the package's .py files and a
.dist-info with METADATA, WHEEL and RECORD), an sdist, and an editable wheel
(a .pth naming this source folder). Metadata comes from pyproject.toml's
[project] table (name, version, description, requires-python, dependencies).
Archive entries have fixed times (SOURCE_DATE_EPOCH, else 1980-01-01) so that
two builds of the same files are the same bytes.
"""
import base64
import gzip
import hashlib
import io
import os
import re
import tarfile
import time
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # python/
PACKAGE = "lazytensor"


# ---- pyproject.toml ---------------------------------------------------------------


def _uncomment(line):
    """The line without its comment (a # outside double quotes), stripped."""
    return re.match(r'^((?:[^"#]|"[^"]*")*)', line).group(1).strip()


def _parse_toml_subset(text):
    """[table] headers, `key = "string"` and `key = ["a", "b"]` (one or more
    lines): enough for this pyproject.toml on Pythons without tomllib (< 3.11)."""
    data, table = {}, None
    lines = iter(text.splitlines())
    for line in lines:
        line = _uncomment(line)
        if not line:
            continue
        m = re.match(r"^\[([A-Za-z0-9_.-]+)\]$", line)
        if m:
            table = data.setdefault(m.group(1), {})
            continue
        m = re.match(r"^([A-Za-z0-9_-]+)\s*=\s*(.*)$", line)
        if not m or table is None:
            raise ValueError("pyproject.toml: cannot read the line %r" % line)
        key, value = m.group(1), m.group(2)
        if value.startswith("["):
            while not value.rstrip().endswith("]"):
                value += " " + _uncomment(next(lines))
            table[key] = re.findall(r'"([^"]*)"', value)
        else:
            m = re.match(r'^"([^"]*)"$', value)
            if not m:
                raise ValueError("pyproject.toml: %s: only strings and lists of strings" % key)
            table[key] = m.group(1)
    return data


def _project():
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        raw = f.read()
    try:
        import tomllib
        data = tomllib.loads(raw.decode("utf-8"))
    except ImportError:
        data = _parse_toml_subset(raw.decode("utf-8"))
    project = data["project"]
    for key in ("name", "version"):
        if key not in project:
            raise ValueError("pyproject.toml: [project] has no %s" % key)
    return project


def _dist_name(project):
    return re.sub(r"[-_.]+", "_", project["name"]).lower()


def _metadata(project):
    lines = ["Metadata-Version: 2.1", "Name: " + project["name"],
             "Version: " + project["version"]]
    if "description" in project:
        lines.append("Summary: " + project["description"])
    if "requires-python" in project:
        lines.append("Requires-Python: " + project["requires-python"])
    for dep in project.get("dependencies", []):
        lines.append("Requires-Dist: " + dep)
    return "\n".join(lines) + "\n"


def _wheel_file():
    return ("Wheel-Version: 1.0\nGenerator: lazytensor_build\nRoot-Is-Purelib: true\n"
            "Tag: py3-none-any\n")


# ---- archives -----------------------------------------------------------------------


def _epoch():
    return max(int(os.environ.get("SOURCE_DATE_EPOCH", "315532800")), 315532800)


def _package_files():
    """(archive name, path) of every .py file of the package, sorted."""
    out = []
    top = os.path.join(ROOT, PACKAGE)
    for d, dirs, files in os.walk(top):
        dirs[:] = sorted(x for x in dirs if x != "__pycache__")
        for f in sorted(files):
            if f.endswith(".py"):
                path = os.path.join(d, f)
                out.append((os.path.relpath(path, ROOT).replace(os.sep, "/"), path))
    if not out:
        raise RuntimeError("lazytensor_build: no .py files under " + top)
    return sorted(out)


def _record_hash(data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return "sha256=" + digest.decode("ascii")


def _write_wheel(wheel_directory, project, entries):
    """entries: (archive name, bytes). Adds the .dist-info files and RECORD."""
    name, version = _dist_name(project), project["version"]
    info = "%s-%s.dist-info" % (name, version)
    entries = list(entries) + [(info + "/METADATA", _metadata(project).encode()),
                               (info + "/WHEEL", _wheel_file().encode())]
    record = "".join("%s,%s,%d\n" % (n, _record_hash(b), len(b)) for n, b in entries)
    record += info + "/RECORD,,\n"
    entries.append((info + "/RECORD", record.encode()))
    filename = "%s-%s-py3-none-any.whl" % (name, version)
    stamp = time.gmtime(_epoch())[:6]
    with zipfile.ZipFile(os.path.join(wheel_directory, filename), "w",
                         zipfile.ZIP_DEFLATED) as z:
        for n, b in entries:
            zi = zipfile.ZipInfo(n, stamp)
            zi.external_attr = 0o644 << 16
            zi.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(zi, b)
    return filename


def _read(path):
    with open(path, "rb") as f:
        return f.read()


# ---- PEP 517 / PEP 660 hooks ------------------------------------------------------


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    project = _project()
    info = "%s-%s.dist-info" % (_dist_name(project), project["version"])
    os.makedirs(os.path.join(metadata_directory, info), exist_ok=True)
    for fname, text in (("METADATA", _metadata(project)), ("WHEEL", _wheel_file())):
        with open(os.path.join(metadata_directory, info, fname), "w") as f:
            f.write(text)
    return info


prepare_metadata_for_build_editable = prepare_metadata_for_build_wheel


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    project = _project()
    return _write_wheel(wheel_directory, project,
                        [(n, _read(p)) for n, p in _package_files()])


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    """A wheel whose one file is a .pth naming this folder: the installed
    package is the source tree's, edits show at the next import."""
    project = _project()
    pth = "__editable__.%s-%s.pth" % (_dist_name(project), project["version"])
    return _write_wheel(wheel_directory, project, [(pth, (ROOT + "\n").encode())])


def build_sdist(sdist_directory, config_settings=None):
    project = _project()
    base = "%s-%s" % (_dist_name(project), project["version"])
    files = [("pyproject.toml", os.path.join(ROOT, "pyproject.toml")),
             ("_build/lazytensor_build.py", os.path.abspath(__file__))] + _package_files()
    filename = base + ".tar.gz"
    entries = [("PKG-INFO", _metadata(project).encode())] + [(n, _read(p)) for n, p in files]
    with open(os.path.join(sdist_directory, filename), "wb") as raw, \
            gzip.GzipFile(filename, "wb", fileobj=raw, mtime=_epoch()) as gz, \
            tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for n, data in entries:
            ti = tarfile.TarInfo(base + "/" + n)
            ti.size, ti.mtime, ti.mode = len(data), _epoch(), 0o644
            tar.addfile(ti, io.BytesIO(data))
    return filename
