// actorcc.UniqueId: the 128-byte group token. create() starts the group's root in this
// process; str()/parse() give the printable form; it pickles (Ray, multiprocessing) as that
// string and compares and hashes by value.
#include <nanobind/stl/string.h>

#include <cstring>
#include <string>

#include "actorcc/unique_id.hpp"
#include "bindings.hpp"

namespace actorcc::py {

void bind_unique_id(nb::module_& m) {
  nb::class_<UniqueId>(m, "UniqueId",
                       "The token that lets ranks find and authenticate a group's root (128 bytes, like "
                       "ncclUniqueId). Create it once (UniqueId.create() starts the root in this process) and hand "
                       "it to every rank: it pickles, and str()/UniqueId.parse() give a printable form. The "
                       "creating process hosts the root for the group's whole life, not only while it forms: "
                       "if it exits or dies, every rank's pending and later calls fail at once with "
                       "RemoteError ('lost the connection to the actorcc root'). Create it in a process that "
                       "lives as long as the group (the driver, or rank 0).")
      .def_static(
          "create",
          [](const std::string& host, uint16_t port) {
            nb::gil_scoped_release nogil;  // binds and starts a listener thread
            return UniqueId::create(host, port);
          },
          nb::arg("host") = "", nb::arg("port") = 0,
          "New id whose root listens on host:port in this process. host '' = ACTORCC_SOCKET_ADDR, else "
          "this host's first non-loopback IPv4, else 127.0.0.1; port 0 = any free port.")
      .def_static("parse", &UniqueId::parse, nb::arg("text"), "Inverse of str(uid) (256 hex characters).")
      .def_static(
          "from_bytes",
          [](nb::bytes b) {
            if (b.size() != UniqueId::kBytes)
              throw_invalid("UniqueId.from_bytes: expected " + std::to_string(UniqueId::kBytes) + " bytes, got " +
                            std::to_string(b.size()));
            UniqueId id;
            std::memcpy(id.bytes.data(), b.c_str(), UniqueId::kBytes);
            return id;
          },
          nb::arg("data"))
      .def("to_bytes", [](const UniqueId& id) { return nb::bytes(reinterpret_cast<const char*>(id.bytes.data()), id.bytes.size()); })
      .def("__str__", &UniqueId::to_string)
      .def("__repr__", [](const UniqueId& id) { return "UniqueId('" + id.to_string().substr(0, 16) + "...')"; })
      .def("__eq__", [](const UniqueId& a, const UniqueId& b) { return a == b; }, nb::is_operator())
      .def("__hash__", [](const UniqueId& id) { return nb::hash(nb::bytes(reinterpret_cast<const char*>(id.bytes.data()), id.bytes.size())); })
      .def("__getstate__", [](const UniqueId& id) { return id.to_string(); })
      .def("__setstate__", [](UniqueId& self, const std::string& s) { new (&self) UniqueId(UniqueId::parse(s)); });
}

}  // namespace actorcc::py
