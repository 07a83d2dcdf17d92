"""A worker keeps the builders its calls use most while rare configurations come and go."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from contextwright.server.bodies import BuildOptions
from contextwright.server.config import ServerConfig
from contextwright.server.service import _BUILDERS, Service
from contextwright.session.memory import MemoryStore


def service(keys_file: Path) -> Service:
    return Service(ServerConfig(store="memory://", keys=str(keys_file)), store=MemoryStore())


def test_the_builder_in_use_survives_many_rare_configurations(keys_file: Path) -> None:
    worker = service(keys_file)
    try:
        usual = BuildOptions(tokenizer="o200k_base")
        first = worker._builder(usual)
        for window in range(1_000, 1_000 + 3 * _BUILDERS):
            worker._builder(BuildOptions(tokenizer="o200k_base", window=window))
            assert worker._builder(usual) is first  # used between each: never the oldest
        assert len(worker._builders) == _BUILDERS
    finally:
        worker.close()


def test_threads_asking_for_one_configuration_share_one_builder(keys_file: Path) -> None:
    worker = service(keys_file)
    try:
        options = BuildOptions(tokenizer="cl100k_base", window=4_096)
        with ThreadPoolExecutor(8) as pool:
            builders = list(pool.map(lambda _: worker._builder(options), range(64)))
        assert len({id(builder) for builder in builders}) == 1
    finally:
        worker.close()
