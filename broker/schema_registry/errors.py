"""The registry's errors: an HTTP status, Confluent's ``error_code`` and message."""

from __future__ import annotations

__all__ = ("RegistryError",)


class RegistryError(Exception):
    """Answered as ``{"error_code": code, "message": message}`` with ``status``."""

    def __init__(self, status: int, code: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message

    @staticmethod
    def subject_not_found(subject: str) -> RegistryError:
        return RegistryError(404, 40401, f"Subject '{subject}' not found.")

    @staticmethod
    def version_not_found(version: object) -> RegistryError:
        return RegistryError(404, 40402, f"Version {version} not found.")

    @staticmethod
    def schema_not_found(schema_id: int | None = None) -> RegistryError:
        text = "Schema not found" if schema_id is None else f"Schema {schema_id} not found"
        return RegistryError(404, 40403, text)

    @staticmethod
    def subject_soft_deleted(subject: str) -> RegistryError:
        return RegistryError(
            404,
            40404,
            f"Subject '{subject}' was soft deleted.Set permanent=true to delete permanently",
        )

    @staticmethod
    def subject_not_soft_deleted(subject: str) -> RegistryError:
        return RegistryError(
            404,
            40405,
            f"Subject '{subject}' was not deleted first before being permanently deleted",
        )

    @staticmethod
    def version_soft_deleted(subject: str, version: int) -> RegistryError:
        return RegistryError(
            404,
            40406,
            f"Subject '{subject}' Version {version} was soft deleted.Set permanent=true to "
            "delete permanently",
        )

    @staticmethod
    def version_not_soft_deleted(subject: str, version: int) -> RegistryError:
        return RegistryError(
            404,
            40407,
            f"Subject '{subject}' Version {version} was not deleted first before being "
            "permanently deleted",
        )

    @staticmethod
    def compatibility_not_configured(subject: str) -> RegistryError:
        return RegistryError(
            404, 40408, f"Subject '{subject}' does not have subject-level compatibility configured"
        )

    @staticmethod
    def mode_not_configured(subject: str) -> RegistryError:
        return RegistryError(
            404, 40409, f"Subject '{subject}' does not have subject-level mode configured"
        )

    @staticmethod
    def incompatible(subject: str, messages: list[str]) -> RegistryError:
        return RegistryError(
            409,
            409,
            "Schema being registered is incompatible with an earlier schema for subject "
            f'"{subject}", '
            f"details: [{', '.join(messages)}]",
        )

    @staticmethod
    def invalid_schema(message: str) -> RegistryError:
        return RegistryError(422, 42201, message)

    @staticmethod
    def invalid_version(version: str) -> RegistryError:
        return RegistryError(
            422,
            42202,
            f"The specified version '{version}' is not a valid version id. Allowed values are "
            'between [1, 2^31-1] and the string "latest"',
        )

    @staticmethod
    def invalid_compatibility(level: object) -> RegistryError:
        return RegistryError(
            422,
            42203,
            "Invalid compatibility level. Valid values are none, backward, forward, full, "
            "backward_transitive, forward_transitive, and full_transitive",
        )

    @staticmethod
    def invalid_mode(mode: object) -> RegistryError:
        return RegistryError(
            422,
            42204,
            "Invalid mode. Valid values are READWRITE, READONLY, READONLY_OVERRIDE, and IMPORT",
        )

    @staticmethod
    def not_permitted(message: str) -> RegistryError:
        return RegistryError(422, 42205, message)

    @staticmethod
    def reference_exists(message: str) -> RegistryError:
        return RegistryError(422, 42206, message)

    @staticmethod
    def invalid_subject(subject: str) -> RegistryError:
        return RegistryError(422, 42208, f"The specified subject '{subject}' is not valid.")

    @staticmethod
    def store(message: str) -> RegistryError:
        return RegistryError(500, 50001, message)

    @staticmethod
    def timeout(message: str) -> RegistryError:
        return RegistryError(500, 50002, message)
