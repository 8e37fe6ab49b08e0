"""The process's one VkInstance, and the record of what the validation layer said.

One instance serves every accelerator of the process: creating one takes a noticeable part of a second
(more with the validation layer; ADR 0008), and devices, not instances, are what an accelerator owns. It
is created on first use and lives until the process ends (the loader's own state does too), so nothing
can destroy it under a device.

Validation is never switched on here: the loader enables VK_LAYER_KHRONOS_validation when the
environment asks (``VK_INSTANCE_LAYERS=VK_LAYER_KHRONOS_validation``, as ``make test`` sets it). When
VK_EXT_debug_utils is offered (the loader offers it), a messenger records every warning and error the
layers report (validation and performance warnings, and errors of any kind; the loader's general
notes are dropped), from instance creation on, so tests can assert that none were reported:
:func:`validation_messages` / :func:`clear_validation_messages`.
"""

from __future__ import annotations

import dataclasses
import threading
from typing import Any

from ...core.errors import Unsupported
from . import binding

API_VERSION = (1, 3, 0)  # the floor: synchronization2, maintenance4 and timeline semaphores are core there


@dataclasses.dataclass(frozen=True)
class ValidationMessage:
    severity: str  # "warning" | "error"
    kind: str  # "general" | "validation" | "performance"
    id_name: str
    text: str

    def __str__(self) -> str:
        return f"[{self.severity} {self.kind}] {self.id_name}: {self.text}"


_SEVERITY_WARNING = 0x100
_SEVERITY_ERROR = 0x1000
_TYPE_GENERAL, _TYPE_VALIDATION, _TYPE_PERFORMANCE = 0x1, 0x2, 0x4

_messages: list[ValidationMessage] = []
_messages_lock = threading.Lock()


def validation_messages() -> list[ValidationMessage]:
    """Warnings and errors the Vulkan layers reported since the last clear (a copy)."""
    with _messages_lock:
        return list(_messages)


def clear_validation_messages() -> None:
    with _messages_lock:
        _messages.clear()


class Instance:
    """The VkInstance, its debug messenger and the physical devices the loader lists."""

    def __init__(self) -> None:
        vk = binding.load()
        self.vk = vk
        self.ffi = vk.ffi
        loader = _loader_version(vk)
        if loader < vk.VK_MAKE_VERSION(*API_VERSION):
            major, minor = loader >> 22 & 0x7F, loader >> 12 & 0x3FF
            raise Unsupported(f"the Vulkan loader offers API {major}.{minor}; the backend needs 1.3")
        try:
            extensions = {e.extensionName for e in vk.vkEnumerateInstanceExtensionProperties(None)}
        except vk.VkError as exc:
            raise Unsupported(f"cannot list Vulkan instance extensions: {type(exc).__name__}") from None
        enabled = []
        flags = 0
        if "VK_KHR_portability_enumeration" in extensions:  # lists MoltenVK-style drivers too
            enabled.append("VK_KHR_portability_enumeration")
            flags |= 0x1  # VK_INSTANCE_CREATE_ENUMERATE_PORTABILITY_BIT_KHR
        self._callback = None
        messenger_info = None
        if "VK_EXT_debug_utils" in extensions:
            enabled.append("VK_EXT_debug_utils")
            messenger_info = self._messenger_info()
        app = vk.VkApplicationInfo(
            pApplicationName="ironaccel",
            applicationVersion=1,
            pEngineName="ironaccel",
            engineVersion=1,
            apiVersion=vk.VK_MAKE_VERSION(*API_VERSION),
        )
        info = vk.VkInstanceCreateInfo(
            pNext=messenger_info,  # also reports what happens during vkCreateInstance itself
            flags=flags,
            pApplicationInfo=app,
            enabledExtensionCount=len(enabled),
            ppEnabledExtensionNames=enabled,
        )
        try:
            self.handle = vk.vkCreateInstance(info, None)
        except vk.VkErrorIncompatibleDriver:
            raise Unsupported("vkCreateInstance: VK_ERROR_INCOMPATIBLE_DRIVER (no Vulkan 1.3 driver)") from None
        except vk.VkError as exc:
            raise Unsupported(f"vkCreateInstance failed: {type(exc).__name__}") from None
        self.messenger = None
        if messenger_info is not None:
            create = vk.vkGetInstanceProcAddr(self.handle, "vkCreateDebugUtilsMessengerEXT")
            self.messenger = create(self.handle, messenger_info, None)
        try:
            self.physical_devices = list(vk.vkEnumeratePhysicalDevices(self.handle))
        except vk.VkError as exc:
            raise Unsupported(f"vkEnumeratePhysicalDevices failed: {type(exc).__name__}") from None

    def _messenger_info(self) -> Any:
        ffi = self.ffi

        def record(severity: int, kinds: int, data: Any, user: Any) -> int:
            del user
            level = "error" if severity & _SEVERITY_ERROR else "warning"
            if level == "warning" and not kinds & (_TYPE_VALIDATION | _TYPE_PERFORMANCE):
                return 0  # the loader's notes ("env var VK_INSTANCE_LAYERS defined ...") are not findings
            if kinds & _TYPE_VALIDATION:
                kind = "validation"
            elif kinds & _TYPE_PERFORMANCE:
                kind = "performance"
            else:
                kind = "general"
            id_name = ffi.string(data.pMessageIdName).decode(errors="replace") if data.pMessageIdName else ""
            text = ffi.string(data.pMessage).decode(errors="replace") if data.pMessage else ""
            with _messages_lock:
                _messages.append(ValidationMessage(level, kind, id_name, text))
            return 0  # VK_FALSE: never abort the call that was reported

        # Our own cffi callback: the package's pfn helper keeps one process-wide Python callback.
        self._callback = ffi.callback("PFN_vkDebugUtilsMessengerCallbackEXT", record)
        info = ffi.new("VkDebugUtilsMessengerCreateInfoEXT *")
        info.sType = self.vk.VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT
        info.messageSeverity = _SEVERITY_WARNING | _SEVERITY_ERROR
        info.messageType = _TYPE_GENERAL | _TYPE_VALIDATION | _TYPE_PERFORMANCE
        info.pfnUserCallback = self._callback
        self._messenger_struct = info  # kept alive: the instance's pNext points at it
        return info[0]


def _loader_version(vk: Any) -> int:
    try:
        return int(vk.vkEnumerateInstanceVersion())
    except (AttributeError, vk.ProcedureNotFoundError):
        return vk.VK_MAKE_VERSION(1, 0, 0)


_instance: Instance | None = None
_instance_lock = threading.Lock()


def instance() -> Instance:
    """The shared instance, created on first use. Raises Unsupported (with the reason) when Vulkan 1.3
    is unavailable; a failed attempt is retried on the next call."""
    global _instance
    with _instance_lock:
        if _instance is None:
            _instance = Instance()
        return _instance
