// What the index shows of the configuration that last opened it (shmipamctl ls): the ranges
// and reuseDelay. A seqlock, so a reader never shows a torn text; written only on change, so the
// claim path pays one comparison.
#include "engine/state/config_display.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <optional>
#include <string>

#include "engine/state/network_store.h"
#include "shm/atomic_word.h"

namespace shmipam::engine {

namespace {

std::string describe_ranges(const NetworkConfig& cfg) {
    std::string s;
    for (size_t i = 0; i < cfg.range_sets.size(); ++i) {
        if (i) s += " ; ";
        for (size_t k = 0; k < cfg.range_sets[i].size(); ++k) {
            if (k) s += ", ";
            const Range& r = cfg.range_sets[i][k];
            s += r.subnet.to_string() + " [" + r.start.to_string() + "-" + r.end.to_string() + "]";
        }
    }
    return s.substr(0, format::kRangesTextBytes - 1);
}

}  // namespace

// Reads of the ranges text before showing nothing: a writer copies under 500 bytes, so a reader
// that keeps meeting writes shows "" rather than wait (display only).
constexpr int kDisplayReadAttempts = 100;

// ranges_seq: bit 0 is set while a writer writes; then bits 1..31 name the writer's pid. Bits
// 32..63 count completed writes (readers compare the whole word). A writer may be killed while
// the word is odd; so that this never wedges the display (readers showing nothing, no writer
// ever writing again), a writer that finds it odd with its writer gone takes over.
namespace {

uint64_t writing(uint64_t seq, pid_t pid) {
    return (seq >> 32 << 32) | (uint64_t(uint32_t(pid) & 0x7FFFFFFF) << 1) | 1;
}

bool writer_gone(uint64_t seq) {
    const pid_t pid = pid_t((seq >> 1) & 0x7FFFFFFF);
    return pid <= 0 || (::kill(pid, 0) != 0 && errno == ESRCH);
}

}  // namespace

namespace {

// The text shown now (the last writer's), or nullopt while a write is under way.
std::optional<std::string> shown_text(const format::IndexHeader& h) {
    const uint64_t before = shm::load_word(h.ranges_seq);
    if (before % 2 == 1) return std::nullopt;
    std::string t(h.ranges_text, strnlen(h.ranges_text, sizeof h.ranges_text));
    if (shm::load_word(h.ranges_seq) != before) return std::nullopt;
    return t;
}

void write_text(format::IndexHeader& h, const std::string& text) {
    if (std::strncmp(h.ranges_text, text.c_str(), sizeof h.ranges_text) == 0) return;
    uint64_t seq = shm::load_word(h.ranges_seq);
    if (seq % 2 == 1 && !writer_gone(seq)) return;  // someone else is writing
    const uint64_t mine = writing(seq, ::getpid());
    if (!shm::cas_word(h.ranges_seq, seq, mine)) return;
    std::memset(h.ranges_text, 0, sizeof h.ranges_text);
    std::memcpy(h.ranges_text, text.data(), text.size());
    uint64_t expected = mine;
    shm::cas_word(h.ranges_seq, expected, ((mine >> 32) + 1) << 32);
}

}  // namespace

void record_config(format::IndexHeader& h, const NetworkConfig& cfg) {
    switch (cfg.display) {
        case NetworkConfig::Display::kKeep:
            return;
        case NetworkConfig::Display::kWithdrawn: {
            auto shown = shown_text(h);
            if (!shown || shown->empty() || shown->ends_with(kWithdrawnMark)) return;
            const std::string marked = *shown + kWithdrawnMark;
            if (marked.size() >= format::kRangesTextBytes) return;  // display only
            write_text(h, marked);
            return;
        }
        case NetworkConfig::Display::kRecord:
            break;
    }
    if (shm::load_word(h.reuse_delay_ms, std::memory_order_relaxed) != cfg.reuse_delay_ms) {
        shm::store_word(h.reuse_delay_ms, cfg.reuse_delay_ms, std::memory_order_relaxed);
    }
    write_text(h, describe_ranges(cfg));
}

std::string NetworkStore::ranges_text() {
    const auto& h = index_.header();
    for (int attempt = 0; attempt < kDisplayReadAttempts; ++attempt) {
        const uint64_t s1 = shm::load_word(h.ranges_seq);
        if (s1 % 2 == 1) continue;
        std::string t(h.ranges_text, strnlen(h.ranges_text, sizeof h.ranges_text));
        std::atomic_thread_fence(std::memory_order_acquire);
        if (shm::load_word(h.ranges_seq) == s1) return t;
    }
    return "";
}

uint64_t NetworkStore::reuse_delay_ms() {
    return shm::load_word(index_.header().reuse_delay_ms);
}

}  // namespace shmipam::engine
