// shmipam: the CNI IPAM plugin binary. Reads the environment and stdin, prints the result or
// error JSON on stdout, logs to stderr, exits (plugin/process.h).
#include <sys/mman.h>

#include <cstdint>

#include "base/build_version.h"
#include "plugin/process.h"

#ifdef SHMIPAM_ORDERED_TEXT
// The functions of the common paths lie together at the start of the text, in the order of
// plugin/plugin.order, whose last name is this function (docs/performance.md, "Code layout").
extern "C" char __executable_start;
extern "C" __attribute__((noinline, used)) void shmipam_hot_text_end() {
    asm volatile("");
}

namespace {

// Maps those pages in one system call instead of faulting them in a window at a time: about
// 0.08 ms less per exec here. A kernel without MADV_POPULATE_READ (before 5.14) refuses it and
// the pages fault in as before.
void populate_hot_text() {
    const uintptr_t page = 4096;
    const uintptr_t begin = reinterpret_cast<uintptr_t>(&__executable_start) & ~(page - 1);
    const uintptr_t end =
        (reinterpret_cast<uintptr_t>(&shmipam_hot_text_end) + page - 1) & ~(page - 1);
    if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_READ);
}

}  // namespace
#endif

SHMIPAM_STAMP_BUILD_VERSION();  // read by shmipamctl install, never by the plugin

int main() {
#ifdef SHMIPAM_ORDERED_TEXT
    populate_hot_text();
#endif
    shmipam::cni::serve_invocation();
}
