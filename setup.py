"""Package discovery for webnn-gpu; all other metadata is in pyproject.toml.

The top-level folders ``interop/`` and ``shaders/`` install as ``webnn_gpu.interop`` and
``webnn_gpu.shaders`` (``package-dir`` in pyproject.toml). ``packages.find`` in
pyproject.toml cannot list them under their package names, so the list is built here:
every package below ``webnn_gpu/``, ``interop/`` and ``shaders/``, renamed into the
``webnn_gpu`` namespace.
"""

from setuptools import find_packages, setup


def _mapped(folder: str, package: str) -> list[str]:
    return [package + p[len(folder):] for p in find_packages(include=[folder, folder + ".*"])]


setup(
    packages=find_packages(include=["webnn_gpu", "webnn_gpu.*"])
    + _mapped("interop", "webnn_gpu.interop")
    + _mapped("shaders", "webnn_gpu.shaders")
)
