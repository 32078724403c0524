"""The build of claimgraph's one distribution: the package and, where Rust is, its native core.

pyproject.toml declares the project; this file declares only what setuptools cannot read from
there: the wheel's layout and the native extension.

* ``claimgraph.native._rust`` (``native/``, Rust through PyO3, abi3 for Python >= 3.11) is built
  by setuptools-rust, in release mode even for an editable install (the equivalence tests and
  benchmarks measure it). It is **optional**: without cargo, or when it does not compile,
  the build goes on and the package runs its pure-Python core, so the one sdist installs
  everywhere. ``CLAIMGRAPH_BUILD_NATIVE=required`` (CI, the Docker builder) makes a missing
  or failing native build an error instead of a pure wheel.
* ``schemas/`` (the Avro contract and the example graph schemas) ships inside the package as
  ``claimgraph/_schemas`` (``claimgraph.core.registry.schema_dir`` finds it there, and in
  the checkout otherwise).
"""

from __future__ import annotations

import os

from setuptools import find_packages, setup
from setuptools_rust import Binding, RustExtension

REQUIRED = os.environ.get("CLAIMGRAPH_BUILD_NATIVE") == "required"
# every file of the wheel that is not a module (tests/test_packaging.py checks it is complete)
PACKAGE_DATA = {
    "claimgraph": ["py.typed"],
    "claimgraph.http": ["review/*"],
    "claimgraph._schemas": ["avro/*/*.avsc", "graphs/*.yaml"],
}

if __name__ == "__main__":  # as setuptools runs it (a test imports the declarations above)
    setup(
        packages=[*find_packages(include=["claimgraph", "claimgraph.*"]), "claimgraph._schemas"],
        package_dir={"claimgraph._schemas": "schemas"},
        package_data=PACKAGE_DATA,
        rust_extensions=[
            RustExtension(
                "claimgraph.native._rust",
                path="native/Cargo.toml",
                binding=Binding.PyO3,
                debug=False,
                optional=not REQUIRED,
            )
        ],
        options={"bdist_wheel": {"py_limited_api": "cp311"}},
        include_package_data=False,  # PACKAGE_DATA is the whole list (MANIFEST.in: the sdist)
        zip_safe=False,
    )
