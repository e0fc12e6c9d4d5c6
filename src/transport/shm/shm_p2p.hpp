// Point-to-point transfers between the local ranks of a ShmGroup.
//
// Every local rank has an inbox of a few channels (shm_inbox_slots: at most 8, whatever the
// number of local ranks, so the segment grows as O(N) and not as the N^2 ordered pairs). A
// receiver grants a free channel of its inbox to a peer it is receiving from in its current
// call: it writes `wanted` (the channel's chunk count once all that call's chunks from the
// peer are in), then the grant word (a grant number and the sender). The sender, finding its
// grant, writes chunks up to `wanted`; once they are all consumed the receiver revokes the
// grant (keeping the grant number, so a re-grant is never mistaken for the old one) and the
// channel is free for another sender. Only the receiver writes the grant, so granting needs no
// lock; a pair that never communicates costs nothing, and all_to_all over all pairs takes
// turns on each inbox (every sender of a call is granted as the channels free up).
//
// A channel: two chunk buffers used in turn, each with a head (its message's size and dtype,
// the chunk's offset and length), and two counters: `posted`, the chunks the grantee has
// written (only it writes it), and `consumed`, the chunks the receiver has copied out. Chunk g
// lives in buffer g % 2; the sender writes it once g < consumed + 2 and g < wanted, the
// receiver reads it once g < posted. The counters are 64-bit and never reset, and a grant is
// made only on a drained channel (posted == consumed), so a grant starts where the channel
// stands. Messages from one sender to one receiver arrive in the order they were sent: the
// receiver grants a sender one channel at a time, and the sender posts its chunks in order.
// A grant outlives the sender's call if the receiver's call expects more (a sender may split
// what the receiver receives in one call over several calls); it never outlives the
// receiver's call, so a sender never holds a channel of a receiver not currently expecting it.
//
// Why a bounded inbox cannot deadlock calls that match: a receiver grants only peers it
// receives from in its current call, so every grant is to a sender whose matching send is in
// a call it runs (now, or once its earlier calls, which do not wait on this receiver's later
// calls, are done); each granted send moves as the receiver consumes, and frees its channel.
//
// Matching: every chunk names its message's size and dtype, so a receiver whose recv differs
// from the sender's send notices at the first chunk, before copying anything, and fails the
// group with an error naming both ranks (the sender then stops with it too). A message of 0
// bytes still carries one empty chunk, for that check. A send completes when the receiver
// has consumed all of it.
//
// Waiting: a rank that can make no progress on any of its transfers sleeps on its doorbell
// (ShmGroup::ring / wait_bell), which a peer rings after posting to, consuming from, granting
// or revoking a channel this rank uses. The timeout counts from the last progress (a chunk
// moved or a grant made), so a long transfer that keeps moving never times out; one that
// stalls names the peers it still waits for.
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

// Sizes of the segment's inboxes, for ShmGroup's layout: channels per inbox, and chunk bytes.
int shm_inbox_slots(int n);
size_t shm_p2p_chunk_bytes(size_t buffer_bytes, int n);
size_t shm_channel_bytes(size_t chunk_bytes);
void shm_init_channel(uint8_t* channel);  // by the segment's creator

}  // namespace actorcc
