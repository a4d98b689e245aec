"""The PEP 517 build backend behind `pip install .` (pyproject.toml): CMake builds the _pipit extension (target
pipit_python, python/CMakeLists.txt), and the package folder it assembles, build/python/pipit, goes into a wheel.

Standard library only, so an offline pip needs nothing from an index: no setuptools, no scikit-build, no download.
The build folder is `build-pip/` at the repository root (configured once: Release, no tests, no benchmarks) unless
one is given, which is then reused as it is (its own options; ninja rebuilds only what changed):
    pip install --config-settings build-dir=build .      or      PIPIT_BUILD_DIR=build pip install .
No sdist and no editable install: for work on the package itself, PYTHONPATH=build/python is the fast loop.
"""
import base64
import hashlib
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NAME = "pipit"


def _version():
    with open(os.path.join(ROOT, "CMakeLists.txt"), encoding="utf-8") as f:
        m = re.search(r"project\(pipit VERSION ([0-9.]+)", f.read())
    if not m:
        raise RuntimeError("no `project(pipit VERSION x.y.z)` in CMakeLists.txt")
    return m.group(1)


def _tag():
    """cp311-cp311-linux_x86_64: this interpreter, its ABI, this machine (the extension is built for all three)."""
    py = "cp%d%d" % sys.version_info[:2]
    if sys.implementation.name != "cpython":
        raise RuntimeError("the pipit extension is built for CPython only")
    return "%s-%s-%s" % (py, py, re.sub(r"[-.]", "_", sysconfig.get_platform()))


def _log(msg):
    print("[pipit build] " + msg, file=sys.stderr, flush=True)


def _run(cmd):
    _log(" ".join(cmd))
    r = subprocess.run(cmd, cwd=ROOT)
    if r.returncode != 0:
        raise RuntimeError("command failed (exit %d): %s" % (r.returncode, " ".join(cmd)))


def _read(path):
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError:
        return ""


def _build_extension(config_settings):
    """Builds target pipit_python; returns the package folder it assembled (build/python/pipit)."""
    given = (config_settings or {}).get("build-dir") or os.environ.get("PIPIT_BUILD_DIR")
    build = os.path.abspath(os.path.join(ROOT, given or "build-pip"))
    if not shutil.which("cmake"):
        raise RuntimeError("cmake not found (Debian: bash scripts/setup.sh --python)")
    # the interpreter the venv was made from (a venv's python goes away with the venv; headers and ABI are the same)
    python = getattr(sys, "_base_executable", None) or sys.executable
    cache = os.path.join(build, "CMakeCache.txt")
    if given and not os.path.exists(cache):
        raise RuntimeError("%s is not a configured CMake build folder" % build)
    if not given and "Python3_EXECUTABLE:FILEPATH=%s\n" % python not in _read(cache):
        cmd = ["cmake", "-S", ROOT, "-B", build, "-DCMAKE_BUILD_TYPE=Release", "-DPIPIT_BUILD_TESTS=OFF",
               "-DPIPIT_BUILD_BENCH=OFF", "-DPIPIT_WITH_PYTHON=ON", "-DPython3_EXECUTABLE:FILEPATH=" + python]
        if shutil.which("ninja"):
            cmd += ["-G", "Ninja"]
        _run(cmd)
    _run(["cmake", "--build", build, "--target", "pipit_python"])
    pkg = os.path.join(build, "python", NAME)
    ext = "_pipit" + sysconfig.get_config_var("EXT_SUFFIX")
    if not os.path.exists(os.path.join(pkg, ext)):
        made = [f for f in os.listdir(pkg) if f.startswith("_pipit")] if os.path.isdir(pkg) else []
        raise RuntimeError("%s has no %s for this Python (%s) but %s: use a build folder configured with "
                           "-DPython3_EXECUTABLE=%s" % (pkg, ext, python, made or "nothing", python))
    return build, pkg


def _files(build, pkg):
    """(path in the wheel, file on disk): the package folder, and the video module where the build made one
    (models/vision/video_file.cpp looks for it next to the extension)."""
    out = []
    for f in sorted(os.listdir(pkg)):
        p = os.path.join(pkg, f)
        if os.path.isfile(p) and not f.endswith(".pyc"):
            out.append((NAME + "/" + f, p))
    video = os.path.join(build, "libpipit_video.so")
    if os.path.exists(video):
        out.append((NAME + "/libpipit_video.so", video))
    return out


def _metadata(version):
    return ("Metadata-Version: 2.1\nName: %s\nVersion: %s\n"
            "Summary: LLM / VLM inference on the CPU: HF checkpoints, .pipit and GGUF files\n"
            "License: MIT\nRequires-Python: >=3.9\nRequires-Dist: numpy\n" % (NAME, version))


def _record_line(arc, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (arc, digest, len(data))


# ---- PEP 517 hooks ----
def get_requires_for_build_wheel(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    version, tag = _version(), _tag()
    build, pkg = _build_extension(config_settings)
    dist_info = "%s-%s.dist-info" % (NAME, version)
    wheel = "%s-%s-%s.whl" % (NAME, version, tag)
    record = []
    with zipfile.ZipFile(os.path.join(wheel_directory, wheel), "w", zipfile.ZIP_DEFLATED) as z:
        def add(arc, data):
            z.writestr(arc, data)
            record.append(_record_line(arc, data))
        for arc, path in _files(build, pkg):
            with open(path, "rb") as f:
                data = f.read()
            info = zipfile.ZipInfo(arc)
            info.external_attr = (os.stat(path).st_mode & 0o777) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
            record.append(_record_line(arc, data))
        add(dist_info + "/METADATA", _metadata(version).encode())
        add(dist_info + "/WHEEL", ("Wheel-Version: 1.0\nGenerator: pipit_build_backend\nRoot-Is-Purelib: false\n"
                                   "Tag: %s\n" % tag).encode())
        record.append(dist_info + "/RECORD,,")
        z.writestr(dist_info + "/RECORD", "\n".join(record) + "\n")
    _log("wrote " + wheel)
    return wheel
