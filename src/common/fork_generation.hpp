// Which fork() generation this process is: 0 in the process that loaded the library, one more
// in each child of fork() (a pthread_atfork child handler counts). An object that records it at
// creation tells on every call whether it is still in its creator process, without the getpid()
// syscall (glibc does not cache the pid; about 0.16 us a call).
#pragma once
#include <cstdint>

namespace actorcc {

uint32_t fork_generation() noexcept;

}  // namespace actorcc
