"""The service answers any request its OpenAPI schema allows, and any it does not, without a 5xx.

Schemathesis generates requests from the service's own schema, valid and invalid (bodies,
paths, headers), and sends them to the app served by real uvicorn over a real SQLite store.
Every answer must be a success or a problem the client caused (4xx); a 500 is a bug. Bounded
for CI; a wide run (``CONTEXTWRIGHT_FUZZ_EXAMPLES=1000``) found nothing either.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from server_helpers import KEYS, write_keys

from contextwright.server import BackgroundServer, Limits, ServerConfig, create_app

EXAMPLES = int(os.environ.get("CONTEXTWRIGHT_FUZZ_EXAMPLES", "25"))


@pytest.fixture(scope="module")
def api_schema(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    folder: Path = tmp_path_factory.mktemp("fuzz")
    keys = write_keys(folder / "keys.toml", {name: [key] for name, key in KEYS.items()})
    config = ServerConfig(store=f"sqlite:///{folder / 'sessions.db'}", keys=str(keys),
                          limits=Limits(), keys_check_every=0.0)
    server = BackgroundServer(create_app(config)).start()
    yield schemathesis.openapi.from_url(f"{server.url}/openapi.json")
    server.stop()


def test_no_request_makes_the_service_fail(api_schema: Any) -> None:
    operations = [result.ok() for result in api_schema.get_all_operations()]
    assert len(operations) >= 8  # probes, build, sessions

    for operation in operations:
        @settings(max_examples=EXAMPLES, deadline=None, database=None,
                  suppress_health_check=list(HealthCheck))
        @given(case=operation.as_strategy())
        def answers_without_failing(case: Any) -> None:
            case.call_and_validate(headers={"Authorization": f"Bearer {KEYS['acme']}"},
                                   checks=[schemathesis.checks.not_a_server_error])

        answers_without_failing()
