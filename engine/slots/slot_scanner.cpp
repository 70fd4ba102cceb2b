#include "engine/slots/slot_scanner.h"

#include <bit>

#include "engine/slots/slot_ops.h"
#include "shm/atomic_word.h"

namespace shmipam::engine {

using format::SlotState;
using shm::SlotWord;

namespace {

u128 block_mask_of(const BlockMap& blocks, Family fam) {
    const int host_bits = family_bits(fam) - blocks.block_prefix(fam);
    return (u128{1} << host_bits) - 1;
}

Candidate read_candidate(shm::BlockFile& b, uint64_t slot, const IpAddress& a, size_t range) {
    const uint64_t w = slot_ops::load_state(b, slot);
    Candidate c{a, range, SlotWord::decode(w).state, 0, &b, slot, w};
    if (c.state == SlotState::kCooling)
        c.released_boot_ns = shm::load_word(b.slot(slot).changed_boot_ns);
    return c;
}

}  // namespace

Expected<ScanResult> ArenaScanner::scan(const RangeSet& set, size_t r, u128 lo, u128 hi,
                                        ScanPass pass, CandidateVisitor visit) {
    const Range& range = set[r];
    const Family fam = range.family();
    const u128 block_mask = block_mask_of(blocks_, fam);
    const u128 last = range.start.value + hi;
    ScanResult out;
    // Block by block; within a block, a 64-bit bitmap word at a time.
    for (u128 a = range.start.value + lo;;) {
        const u128 base = a & ~block_mask;
        const u128 seg_hi = std::min(last, base | block_mask);
        // A block that does not exist yet is all free: the hinted pass creates it.
        auto block = blocks_.block_holding(IpAddress{base, fam}, pass == ScanPass::kHinted);
        if (!block) return block.error();
        if (*block != nullptr) {
            shm::BlockFile& b = **block;
            const uint64_t s_hi = uint64_t(seg_hi - base);
            for (uint64_t s = uint64_t(a - base); s <= s_hi;) {
                const uint64_t word_index = s / 64;
                uint64_t candidates =
                    pass == ScanPass::kHinted
                        ? ~shm::load_word(b.bitmap()[word_index], std::memory_order_relaxed)
                        : ~uint64_t{0};
                // Keep only bits in [s, min(s_hi, end of this word)].
                candidates &= ~uint64_t{0} << (s % 64);
                const uint64_t word_last = word_index * 64 + 63;
                if (s_hi < word_last) candidates &= ~uint64_t{0} >> (63 - s_hi % 64);
                while (candidates != 0) {
                    const uint64_t slot = word_index * 64 + uint64_t(std::countr_zero(candidates));
                    candidates &= candidates - 1;
                    const IpAddress addr{base + slot, fam};
                    if (excluded_in_set(set, addr)) continue;
                    const Candidate c = read_candidate(b, slot, addr, r);
                    if (c.state != SlotState::kFree && c.state != SlotState::kCooling) {
                        if (pass == ScanPass::kHinted) {
                            slot_ops::sync_hint(b, slot);  // a stale hint
                        } else if (heal_(b, slot, c.word)) {
                            ++out.healed;  // FREE or COOLING now: the next look sees it
                        }
                        continue;
                    }
                    if (visit(c)) {
                        out.stopped = true;
                        return out;
                    }
                }
                if (word_last >= s_hi) break;
                s = word_last + 1;
            }
        }
        if (seg_hi >= last) return out;
        a = seg_hi + 1;
    }
}

Expected<Candidate> ArenaScanner::look(const IpAddress& a) {
    auto block = blocks_.block_holding(a, true);
    if (!block) return block.error();
    const uint64_t slot = uint64_t(a.value & block_mask_of(blocks_, a.family));
    return read_candidate(**block, slot, a, 0);
}

bool ArenaScanner::heal(const Candidate& c) {
    return heal_(*c.block, c.slot, c.word);
}

bool ArenaScanner::try_claim(const Candidate& c, uint64_t* claimed_word) {
    return slot_ops::claim(*c.block, c.slot, c.word, lease_, claimed_word);
}

}  // namespace shmipam::engine
