// actorcc.UniqueId: the 128-byte group token. create() starts the group's root in this
// process; str()/parse() give the printable form; it pickles (Ray, multiprocessing) as that
// string and compares and hashes by value.
#include <nanobind/stl/string.h>

#include <cstring>
#include <set>
#include <string>

#include "actorcc/unique_id.hpp"
#include "bindings.hpp"

namespace actorcc::py {

namespace {

// Ids that create() made in this process and whose bytes have not left it (never printed,
// pickled or turned into bytes). Such an id, once dropped, can reach no rank, so its root is
// stopped (if no rank of this process joined through it): an unused id costs nothing. An id
// that was handed out keeps its root, since a rank elsewhere may still be on its way. Guarded
// by the GIL.
std::set<std::string>& private_ids() {
  static std::set<std::string> s;
  return s;
}
std::string key(const UniqueId& id) { return std::string(reinterpret_cast<const char*>(id.bytes.data()), id.bytes.size()); }
void mark_exported(const UniqueId& id) { private_ids().erase(key(id)); }

// weakref.finalize callback of a create()d id.
void release_if_private(nb::bytes b) {
  std::string k(b.c_str(), b.size());
  if (private_ids().erase(k) == 0 || k.size() != UniqueId::kBytes) return;
  UniqueId id;
  std::memcpy(id.bytes.data(), k.data(), UniqueId::kBytes);
  nb::gil_scoped_release nogil;  // joins the root's thread
  id.stop_root_if_unused();
}

}  // namespace

void bind_unique_id(nb::module_& m) {
  nb::class_<UniqueId>(m, "UniqueId", nb::is_weak_referenceable(),
                       "The token that lets ranks find and authenticate a group's root (128 bytes, like "
                       "ncclUniqueId). Create it once (UniqueId.create() starts the root in this process) and hand "
                       "it to every rank: it pickles, and str()/UniqueId.parse() give a printable form. The "
                       "creating process hosts the root for the group's whole life, not only while it forms: "
                       "if it exits or dies, every rank's pending and later calls fail at once with "
                       "RemoteError ('lost the connection to the actorcc root'). Create it in a process that "
                       "lives as long as the group (the driver, or rank 0).")
      .def_static(
          "create",
          [](const std::string& host, uint16_t port, bool creator_is_rank0) {
            UniqueId id;
            {
              nb::gil_scoped_release nogil;  // binds and starts a listener thread
              id = UniqueId::create(host, port, creator_is_rank0);
            }
            nb::object obj = nb::cast(id);
            private_ids().insert(key(id));
            nb::object fin = nb::module_::import_("weakref").attr("finalize")(
                obj, nb::cpp_function(&release_if_private), nb::bytes(key(id).data(), key(id).size()));
            fin.attr("atexit") = false;  // at exit the registry stops every root anyway
            return obj;
          },
          nb::arg("host") = "", nb::arg("port") = 0, nb::arg("creator_is_rank0") = false,
          "New id whose root listens on host:port in this process. host '' = ACTORCC_SOCKET_ADDR, else "
          "this host's first non-loopback IPv4, else 127.0.0.1; port 0 = any free port. The root listens on "
          "exactly that address. An id dropped before its bytes left this process (never pickled, str()'d "
          "or to_bytes()'d) and before any rank joined stops its root. creator_is_rank0: this process will "
          "be rank 0, so a lost root is reported as rank 0's death (rank 0 the culprit).")
      .def_static("parse", &UniqueId::parse, nb::arg("text"), "Inverse of str(uid) (256 hex characters).")
      .def_static(
          "from_bytes",
          [](nb::bytes b) {
            if (b.size() != UniqueId::kBytes)
              throw_invalid("UniqueId.from_bytes: expected " + std::to_string(UniqueId::kBytes) + " bytes, got " +
                            std::to_string(b.size()));
            return UniqueId::from_bytes(b.c_str(), b.size());  // a corrupt id raises here, naming what is wrong
          },
          nb::arg("data"))
      .def("to_bytes",
           [](const UniqueId& id) {
             mark_exported(id);
             return nb::bytes(reinterpret_cast<const char*>(id.bytes.data()), id.bytes.size());
           })
      .def("__str__",
           [](const UniqueId& id) {
             mark_exported(id);
             return id.to_string();
           })
      .def("__repr__", [](const UniqueId& id) { return "UniqueId('" + id.to_string().substr(0, 16) + "...')"; })
      .def("__eq__", [](const UniqueId& a, const UniqueId& b) { return a == b; }, nb::is_operator())
      .def("__hash__", [](const UniqueId& id) { return nb::hash(nb::bytes(reinterpret_cast<const char*>(id.bytes.data()), id.bytes.size())); })
      .def("__getstate__",
           [](const UniqueId& id) {
             mark_exported(id);
             return id.to_string();
           })
      .def("__setstate__", [](UniqueId& self, const std::string& s) { new (&self) UniqueId(UniqueId::parse(s)); });
}

}  // namespace actorcc::py
