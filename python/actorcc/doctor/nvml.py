"""The GPUs of this host as NVML sees them (ctypes on libnvidia-ml.so.1).

NVML ignores CUDA_VISIBLE_DEVICES: it always lists every GPU of the host in PCI order, which
is what lets the doctor tell which physical GPU a masked process got. `query()` turns NVML
into plain JSON facts; it takes any object with the methods of `Nvml`, so tests can pass a
fake one.
"""
from __future__ import annotations

import ctypes

NVLINK_MAX_LINKS = 18  # NVML_NVLINK_MAX_LINKS on Hopper; later parts report NOT_SUPPORTED past it
NVLINK_GBPS_PER_LINK = 26.56  # per direction, H100/H200 NVLink4 (the doctor's bandwidth yardstick)
DEVICE_TYPE_GPU, DEVICE_TYPE_SWITCH = 0, 2
P2P_CAPS_INDEX_NVLINK = 2
FABRIC_STATES = {0: "not-supported", 1: "not-started", 2: "in-progress", 3: "completed"}
# nvmlGpuTopologyLevel_t -> the words nvidia-smi topo -m uses
TOPO_LEVELS = {0: "BOARD", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}


class NvmlError(RuntimeError):
    pass


class _PciInfo(ctypes.Structure):  # nvmlPciInfo_t (v3)
    _fields_ = [("busIdLegacy", ctypes.c_char * 16), ("domain", ctypes.c_uint),
                ("bus", ctypes.c_uint), ("device", ctypes.c_uint), ("pciDeviceId", ctypes.c_uint),
                ("pciSubSystemId", ctypes.c_uint), ("busId", ctypes.c_char * 32)]


class _FabricInfoV2(ctypes.Structure):  # nvmlGpuFabricInfo_v2_t
    _fields_ = [("version", ctypes.c_uint), ("clusterUuid", ctypes.c_uint8 * 16),
                ("status", ctypes.c_int), ("cliqueId", ctypes.c_uint32),
                ("state", ctypes.c_uint8), ("healthMask", ctypes.c_uint32)]


class _FabricInfoV1(ctypes.Structure):  # nvmlGpuFabricInfo_t
    _fields_ = [("clusterUuid", ctypes.c_uint8 * 16), ("status", ctypes.c_int),
                ("cliqueId", ctypes.c_uint32), ("state", ctypes.c_uint8)]


def normalize_bus_id(bus_id: str) -> str:
    """'00000000:18:00.0' (NVML) and '0000:18:00.0' (CUDA) -> '0000:18:00.0', lower case."""
    bus_id = bus_id.strip().lower()
    domain, _, rest = bus_id.partition(":")
    if not rest:
        return bus_id
    return f"{int(domain, 16):04x}:{rest}"


class Nvml:
    """A few NVML calls; every method raises NvmlError when NVML says no."""

    def __init__(self, libname: str = "libnvidia-ml.so.1"):
        try:
            self._lib = ctypes.CDLL(libname)
        except OSError as e:
            raise NvmlError(f"cannot load {libname}: {e}") from None
        self._call("nvmlInit_v2")

    def _call(self, name, *args):
        try:
            fn = getattr(self._lib, name)
        except AttributeError:
            raise NvmlError(f"{name} not in this driver's NVML") from None
        rc = fn(*args)
        if rc != 0:
            err = self._lib.nvmlErrorString
            err.restype = ctypes.c_char_p
            raise NvmlError(f"{name}: {err(rc).decode(errors='replace')} ({rc})")

    def _string(self, name, *args, size=96):
        buf = ctypes.create_string_buffer(size)
        self._call(name, *args, buf, ctypes.c_uint(size))
        return buf.value.decode(errors="replace")

    def shutdown(self):
        try:
            self._call("nvmlShutdown")
        except NvmlError:
            pass

    def driver_version(self) -> str:
        return self._string("nvmlSystemGetDriverVersion")

    def cuda_driver_version(self) -> int:
        v = ctypes.c_int()
        self._call("nvmlSystemGetCudaDriverVersion", ctypes.byref(v))
        return v.value

    def count(self) -> int:
        n = ctypes.c_uint()
        self._call("nvmlDeviceGetCount_v2", ctypes.byref(n))
        return n.value

    def handle(self, index: int):
        h = ctypes.c_void_p()
        self._call("nvmlDeviceGetHandleByIndex_v2", ctypes.c_uint(index), ctypes.byref(h))
        return h

    def name(self, h) -> str:
        return self._string("nvmlDeviceGetName", h)

    def uuid(self, h) -> str:
        return self._string("nvmlDeviceGetUUID", h)

    def pci_bus_id(self, h) -> str:
        info = _PciInfo()
        self._call("nvmlDeviceGetPciInfo_v3", h, ctypes.byref(info))
        return normalize_bus_id(info.busId.decode())

    def nvlink_active(self, h, link: int) -> bool:
        v = ctypes.c_uint()
        self._call("nvmlDeviceGetNvLinkState", h, ctypes.c_uint(link), ctypes.byref(v))
        return bool(v.value)

    def nvlink_remote(self, h, link: int) -> tuple[int, str]:
        """(remote device type, remote PCI bus id) of an active link."""
        info = _PciInfo()
        self._call("nvmlDeviceGetNvLinkRemotePciInfo_v2", h, ctypes.c_uint(link), ctypes.byref(info))
        kind = ctypes.c_int(-1)
        try:
            self._call("nvmlDeviceGetNvLinkRemoteDeviceType", h, ctypes.c_uint(link), ctypes.byref(kind))
        except NvmlError:
            pass
        return kind.value, normalize_bus_id(info.busId.decode())

    def common_ancestor(self, h1, h2) -> int:
        v = ctypes.c_int()
        self._call("nvmlDeviceGetTopologyCommonAncestor", h1, h2, ctypes.byref(v))
        return v.value

    def p2p_status(self, h1, h2, index: int) -> int:
        v = ctypes.c_int()
        self._call("nvmlDeviceGetP2PStatus", h1, h2, ctypes.c_int(index), ctypes.byref(v))
        return v.value

    def fabric(self, h) -> dict:
        try:
            info = _FabricInfoV2()
            info.version = ctypes.sizeof(_FabricInfoV2) | (2 << 24)
            self._call("nvmlDeviceGetGpuFabricInfoV", h, ctypes.byref(info))
        except NvmlError as e:
            if "not in this driver" not in str(e):
                raise
            info = _FabricInfoV1()  # drivers before r550
            self._call("nvmlDeviceGetGpuFabricInfo", h, ctypes.byref(info))
        return {"state": FABRIC_STATES.get(info.state, str(info.state)), "status": info.status,
                "clique_id": info.cliqueId, "cluster_uuid": bytes(info.clusterUuid).hex()}


def _try(fn, *args, default=None):
    try:
        return fn(*args)
    except NvmlError:
        return default


def query(nvml=None) -> dict:
    """NVML facts: driver, every GPU of the host, the link between each pair, NVSwitch."""
    out = {"available": False, "error": None, "driver_version": None, "cuda_driver_version": None,
           "gpus": [], "links": {}, "nvswitch": False}
    try:
        nv = nvml if nvml is not None else Nvml()
    except NvmlError as e:
        out["error"] = str(e)
        return out
    try:
        out["available"] = True
        out["driver_version"] = _try(nv.driver_version)
        cv = _try(nv.cuda_driver_version)
        out["cuda_driver_version"] = f"{cv // 1000}.{cv % 1000 // 10}" if cv else None
        handles = [nv.handle(i) for i in range(nv.count())]
        for i, h in enumerate(handles):
            out["gpus"].append(_gpu(nv, i, h))
        by_bus = {g["pci_bus_id"]: g["index"] for g in out["gpus"]}
        for g in out["gpus"]:
            g["nvlink_peers"] = {}
            for bus, n in g.pop("_remote").items():
                if bus in by_bus:
                    g["nvlink_peers"][str(by_bus[bus])] = n
                else:  # the far end is no GPU NVML lists here: an NVSwitch (type not reported)
                    g["nvswitch_links"] += n
        out["nvswitch"] = any(g["nvswitch_links"] > 0 or (g["fabric"] or {}).get("state") in
                              ("completed", "in-progress", "not-started") for g in out["gpus"])
        for i, gi in enumerate(out["gpus"]):
            for j, gj in enumerate(out["gpus"]):
                if j > i:
                    out["links"][f"{i},{j}"] = _link(nv, handles[i], handles[j], gi, gj)
    except NvmlError as e:
        out["error"] = str(e)
    finally:
        if nvml is None:
            nv.shutdown()
    return out


def _gpu(nv, index, h) -> dict:
    g = {"index": index, "name": _try(nv.name, h), "uuid": _try(nv.uuid, h),
         "pci_bus_id": _try(nv.pci_bus_id, h, default=""), "nvlinks_active": 0,
         "nvswitch_links": 0, "fabric": _try(nv.fabric, h), "_remote": {}}
    for link in range(NVLINK_MAX_LINKS):
        if not _try(nv.nvlink_active, h, link, default=False):
            continue
        g["nvlinks_active"] += 1
        kind, bus = _try(nv.nvlink_remote, h, link, default=(-1, ""))
        if kind == DEVICE_TYPE_SWITCH:
            g["nvswitch_links"] += 1
        elif bus:
            g["_remote"][bus] = g["_remote"].get(bus, 0) + 1
    return g


def _link(nv, hi, hj, gi, gj) -> dict:
    """How GPU i reaches GPU j: NV<n> (direct links or through NVSwitch) or the PCIe level."""
    direct = gi["nvlink_peers"].get(str(gj["index"]), 0)
    if direct:
        return {"type": f"NV{direct}", "via": "nvlink", "nvlinks": direct}
    if gi["nvswitch_links"] and gj["nvswitch_links"]:
        ok = _try(nv.p2p_status, hi, hj, P2P_CAPS_INDEX_NVLINK, default=0) == 0
        if ok:
            n = min(gi["nvswitch_links"], gj["nvswitch_links"])
            return {"type": f"NV{n}", "via": "nvswitch", "nvlinks": n}
    level = _try(nv.common_ancestor, hi, hj)
    return {"type": TOPO_LEVELS.get(level, "?"), "via": "pcie", "nvlinks": 0}
