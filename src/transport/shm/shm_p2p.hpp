// Point-to-point transfers between the local ranks of a ShmGroup.
//
// Every ordered pair (src, dst) has a channel in the group's segment: two chunk buffers used
// in turn, each with a head (its message's size and dtype, the chunk's offset and length),
// and two counters: `posted`, the chunks src has written (only src writes it), and
// `consumed`, the chunks dst has copied out (only dst writes it). Chunk g lives in buffer
// g % 2; src writes it once g < consumed + 2 (so never over a buffer dst still reads) and
// dst reads it once g < posted. The counters are 64-bit and never reset, so a channel needs
// no setup between calls, and messages on a channel arrive in the order they were sent.
//
// Matching: every chunk names its message's size and dtype, so a receiver whose recv differs
// from the sender's send notices at the first chunk, before copying anything, and fails the
// group with an error naming both ranks (the sender then stops with it too). A message of 0
// bytes still carries one empty chunk, for that check. A send completes when the receiver
// has consumed all of it.
//
// Waiting: a rank that can make no progress on any of its transfers sleeps on its doorbell
// (ShmGroup::ring / wait_bell), which a peer rings after posting to or consuming from a
// channel this rank uses. The timeout counts from the last progress, so a long transfer that
// keeps moving never times out; one that stalls names the peers it still waits for.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "actorcc/types.hpp"
#include "transport/shm/shm_group.hpp"

namespace actorcc {

struct ShmTransfer {
  bool send = true;
  uint8_t* buf = nullptr;  // read for a send, written for a recv
  size_t bytes = 0;
  DataType dtype = DataType::Float32;
  int peer = 0;            // local index; may be this rank (paired in order with a recv from self)
};

// Runs every transfer to completion, all progressing at once; transfers on the same channel
// (same peer, same direction) run in their order in `xfers`. `what` names the call in errors.
// Throws InvalidArgument (mismatch), TimeoutError or RemoteError; the first two poison the group.
void shm_transfer(ShmGroup& g, const std::vector<ShmTransfer>& xfers, const char* what);

// Sizes of the segment's channel region, for ShmGroup's layout.
size_t shm_p2p_chunk_bytes(size_t buffer_bytes, int n);
size_t shm_channel_bytes(size_t chunk_bytes);
void shm_init_channel(uint8_t* channel);  // by the segment's creator

}  // namespace actorcc
