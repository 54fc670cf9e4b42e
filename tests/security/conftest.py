"""Fixtures of the security tests: certificates and brokers on SSL / SASL listeners."""

from __future__ import annotations

import pytest

from tests.security.certs import CertFiles, make_certs


@pytest.fixture(scope="session")
def certs(tmp_path_factory: pytest.TempPathFactory) -> CertFiles:
    return make_certs(tmp_path_factory.mktemp("certs"))
