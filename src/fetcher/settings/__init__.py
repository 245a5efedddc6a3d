"""The environment, read once by the entry points and passed down (contract §9).

* :mod:`~fetcher.settings.environment`: :class:`Settings` and the §9.3 refusals of a bad value.
* :mod:`~fetcher.settings.auth`: the ``AUTH_*`` settings of §12.
* :mod:`~fetcher.settings.tracing`: the OpenTelemetry settings.

Nothing here opens anything: ``fetcher.bootstrap`` builds the runtime from these values.
"""

from fetcher.settings.auth import AuthMode, AuthSettings
from fetcher.settings.environment import (
    DEFAULT_SQLITE_URL,
    Mode,
    ObjectStorageSettings,
    RabbitSettings,
    Settings,
    StartupRefused,
    sqlite_store_path,
)

__all__ = [
    "DEFAULT_SQLITE_URL",
    "AuthMode",
    "AuthSettings",
    "Mode",
    "ObjectStorageSettings",
    "RabbitSettings",
    "Settings",
    "StartupRefused",
    "sqlite_store_path",
]
