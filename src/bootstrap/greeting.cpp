#include "bootstrap/greeting.hpp"

#include <cstdio>
#include <string>
#include <thread>

#include "actorcc/error.hpp"
#include "common/text.hpp"

namespace actorcc::bootstrap {

using namespace std::chrono;
using net::IoStatus;

namespace {

std::string hex_bytes(const uint8_t* b, size_t n) {
  std::string s;
  char buf[4];
  for (size_t i = 0; i < n; ++i) {
    std::snprintf(buf, sizeof buf, "%02x", b[i]);
    s += (i ? " " : "") + std::string(buf);
  }
  return s;
}

// The same suggestion closes every "not an actorcc root" message.
std::string foreign(const std::string& where, const std::string& what) {
  return where + " " + what + ": it is not an actorcc root (another program holds the port?)";
}

}  // namespace

std::optional<Greeting> greet(const net::SockAddr& root, const GreetingRules& rules, const AbortSignal* abort,
                              int rank) {
  const std::string where = root.to_string();
  std::optional<Clock::time_point> closing_since;  // start of a run of connections closed unanswered
  for (;;) {
    net::Fd fd;
    try {
      fd = net::connect_with_retry(root, rules.connect_by, abort, rank, rules.refused_for);
    } catch (const RemoteError& e) {
      if (rules.on_gone) rules.on_gone(e);
      throw;
    }
    const Deadline greet_by =
        rules.silence_is_foreign ? Deadline::after(kGreetingWait).earliest(rules.answer_by) : rules.answer_by;
    uint8_t head[wire::kHeaderBytes];
    net::IoResult io = net::recv_all(fd.get(), head, sizeof head, greet_by, abort);
    if (io.status == IoStatus::Aborted) abort->rethrow();
    if (io.status == IoStatus::Timeout) {
      if (rules.answer_by.expired()) return std::nullopt;
      throw TimeoutError(cat(foreign(where, cat("accepted the connection but sent nothing for ",
                                                kGreetingWait.count() / 1000, " s, where an actorcc root greets at once")),
                             " (or the process hosting the root is stopped, or it runs an actorcc older than "
                             "bootstrap protocol ",
                             wire::kProtocolVersion, ")"),
                         rank, -1);
    }
    if (io.status == IoStatus::Closed) {
      // A root closes a connection unanswered only to make room under a flood of strangers
      // (StrangerGate's cap): connect again, for a while.
      if (!closing_since) closing_since = Clock::now();
      if (Clock::now() - *closing_since >= kGreetingWait || rules.answer_by.expired())
        throw RemoteError(cat(foreign(where, cat("kept closing connections without a greeting for ",
                                                 kGreetingWait.count() / 1000, " s (", io.detail, ")")),
                              " (or it runs an actorcc older than bootstrap protocol ", wire::kProtocolVersion, ")"),
                          -1, rank);
      std::this_thread::sleep_for(milliseconds(50));
      continue;
    }
    if (!wire::has_frame_magic(head, sizeof head))
      throw RemoteError(foreign(where, "answered with bytes that are not actorcc's protocol (" +
                                           hex_bytes(head, sizeof head) + ")"),
                        -1, rank);
    wire::Header h;
    try {
      h = wire::decode_header(head, sizeof head, wire::kChallengePayload);
    } catch (const wire::WireError& e) {
      throw RemoteError(where + " answered with an actorcc frame this build cannot read (" + e.what() +
                            "): every rank and the root need the same actorcc version",
                        -1, rank);
    }
    if (h.type != wire::MsgType::Challenge)
      throw RemoteError(cat(where, " answered with ", wire::to_string(h.type),
                            " where an actorcc root of bootstrap protocol ", wire::kProtocolVersion,
                            " greets with CHALLENGE: every rank and the root need the same actorcc version"),
                        -1, rank);
    std::string payload(h.length, '\0');
    io = net::recv_all(fd.get(), payload.data(), payload.size(), greet_by, abort);
    if (io.status == IoStatus::Aborted) abort->rethrow();
    if (io.status != IoStatus::Ok) {
      if (rules.answer_by.expired()) return std::nullopt;
      throw RemoteError(foreign(where, "sent a truncated CHALLENGE (" + io.detail + ")"), -1, rank);
    }
    try {
      auto m = wire::decode_payload(h.type, payload);
      return Greeting{std::move(fd), std::get<wire::Challenge>(m).nonce};
    } catch (const wire::WireError& e) {
      throw RemoteError(foreign(where, std::string("sent a malformed CHALLENGE (") + e.what() + ")"), -1, rank);
    }
  }
}

}  // namespace actorcc::bootstrap
