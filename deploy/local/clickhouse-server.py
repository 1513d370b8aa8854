"""deploy/local/clickhouse-server.py CONFIG DATA: a current ClickHouse server from PyPI's chdb-core.

chdb-core carries ClickHouse as a library (clickhouse-local). clickhouse-local serves the ordinary HTTP and native
protocols once told to (SYSTEM START LISTEN), with the ports and users of ./config.xml in its working directory,
and only while a query of its own runs: so this starts the listeners, then runs a query that never ends. SIGTERM
(infra.sh down) ends the process through ClickHouse's own handler. infra.sh writes CONFIG (a config.xml) and
keeps the data in DATA.
"""

import ctypes
import importlib.util
import os
import sys

SERVE = """
SYSTEM START LISTEN HTTP;
SYSTEM START LISTEN TCP;
SELECT sleepEachRow(3) FROM system.numbers SETTINGS max_block_size = 1, function_sleep_max_microseconds_per_block = 0
"""


def load_engine():
    """The extension alone: chdb/__init__.py opens a session at import, after which query() fails
    ("EventNotifier is initialized twice"). RTLD_DEEPBIND as the package itself loads it, from its own folder,
    where the libraries it needs lie."""
    package_dir = os.path.dirname(importlib.util.find_spec("chdb").origin)
    library = os.path.join(package_dir, "_chdb.abi3.so")
    ctypes.CDLL(library, mode=sys.getdlopenflags() | os.RTLD_DEEPBIND)
    spec = importlib.util.spec_from_file_location("_chdb", library)
    engine = importlib.util.module_from_spec(spec)
    cwd = os.getcwd()
    os.chdir(package_dir)
    try:
        spec.loader.exec_module(engine)
    finally:
        os.chdir(cwd)
    return engine


def main():
    config, data = (os.path.abspath(path) for path in sys.argv[1:3])
    engine = load_engine()
    os.chdir(os.path.dirname(config))
    engine.query(SERVE, "CSV", path=data)


if __name__ == "__main__":
    main()
