#include "bootstrap/frame_io.hpp"

namespace actorcc::wire {

net::IoResult send_message(int fd, const Message& m, Deadline deadline, const AbortSignal* abort) {
  std::string frame = encode(m);
  return net::send_all(fd, frame.data(), frame.size(), deadline, abort);
}

Received recv_message(int fd, Deadline deadline, const AbortSignal* abort) {
  Received out;
  char head[kHeaderBytes];
  out.io = net::recv_all(fd, head, sizeof(head), deadline, abort);
  if (out.io.status != net::IoStatus::Ok) return out;
  Header h = decode_header(head, sizeof(head));
  std::string payload(h.length, '\0');
  // Once a header is in, the rest of the frame is already on its way: the same deadline.
  out.io = net::recv_all(fd, payload.data(), payload.size(), deadline, abort);
  if (out.io.status != net::IoStatus::Ok) return out;
  out.msg = decode_payload(h.type, payload);
  return out;
}

}  // namespace actorcc::wire
