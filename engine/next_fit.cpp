#include "engine/next_fit.h"

#include <bit>
#include <optional>

#include "engine/recovery.h"
#include "engine/slot_ops.h"
#include "shm/atomic_word.h"

namespace shmipam::engine {

using format::SlotState;
using shm::SlotWord;

namespace {

struct Position {
    size_t range = 0;
    u128 offset = 0;  // from the range's start
};

Position decode_cursor(uint64_t c, const RangeSet& set) {
    if (c == 0) return {};
    Position p{size_t(c >> format::kCursorRangeShift), u128{c & format::kCursorOffsetMask}};
    if (p.range >= set.size()) return {};
    if (p.offset >= set[p.range].size()) return {(p.range + 1) % set.size(), 0};
    return p;
}

uint64_t encode_cursor(size_t range, u128 offset_of_next) {
    const u128 off = offset_of_next > format::kCursorOffsetMask ? 0 : offset_of_next;
    return (uint64_t(range) << format::kCursorRangeShift) | uint64_t(off);
}

struct Cooling {
    shm::BlockFile* block = nullptr;
    uint64_t slot = 0;
    uint64_t word = 0;
    uint64_t released_ns = 0;
    IpAddress address;
    size_t range = 0;
};

enum class Pass { kHinted, kExhaustive };

// Walks [lo, hi] of one range block by block; calls visit(block, slot, address) for each
// candidate (hint bit clear in kHinted; every slot in kExhaustive). visit returns true to stop.
template <typename Visit>
Expected<bool> walk(NetworkStore& store, const RangeSet& set, u128 lo, u128 hi, Family fam,
                    Pass pass, Visit&& visit) {
    const int prefix = store.block_prefix(fam);
    const int host_bits = family_bits(fam) - prefix;
    const u128 block_mask = (u128{1} << host_bits) - 1;
    u128 a = lo;
    for (;;) {
        const u128 base = a & ~block_mask;
        const u128 seg_hi = std::min(hi, base | block_mask);
        const IpAddress base_ip{base, fam};
        // A block that does not exist yet is all free: the hinted pass creates it.
        auto block = store.block_for(base_ip, pass == Pass::kHinted);
        if (!block) return block.error();
        if (*block != nullptr) {
            shm::BlockFile& b = **block;
            const uint64_t s_lo = uint64_t(a - base);
            const uint64_t s_hi = uint64_t(seg_hi - base);
            uint64_t s = s_lo;
            while (s <= s_hi) {
                uint64_t candidates;
                const uint64_t word_index = s / 64;
                if (pass == Pass::kHinted) {
                    candidates = ~shm::load_word(b.bitmap()[word_index], std::memory_order_relaxed);
                } else {
                    candidates = ~uint64_t{0};
                }
                // Keep only bits in [s, min(s_hi, end of this word)].
                const uint64_t first_bit = s % 64;
                candidates &= ~uint64_t{0} << first_bit;
                const uint64_t word_last = word_index * 64 + 63;
                if (s_hi < word_last) candidates &= ~uint64_t{0} >> (63 - s_hi % 64);
                while (candidates != 0) {
                    const uint64_t bit = uint64_t(std::countr_zero(candidates));
                    candidates &= candidates - 1;
                    const uint64_t slot = word_index * 64 + bit;
                    const IpAddress addr{base + slot, fam};
                    if (excluded_in_set(set, addr)) continue;
                    if (visit(b, slot, addr)) return true;
                }
                if (word_last >= s_hi) break;
                s = word_last + 1;
            }
        }
        if (seg_hi >= hi) return false;
        a = seg_hi + 1;
    }
}

// Visits every address of the set once, starting at `start` and wrapping around.
template <typename Visit>
Expected<bool> walk_set(NetworkStore& store, const RangeSet& set, Position start, Pass pass,
                        Visit&& visit) {
    const size_t n = set.size();
    auto run = [&](size_t r, u128 from, u128 to) -> Expected<bool> {
        const Range& range = set[r];
        return walk(
            store, set, range.start.value + from, range.start.value + to, range.family(), pass,
            [&](shm::BlockFile& b, uint64_t s, const IpAddress& a) { return visit(b, s, a, r); });
    };
    auto first = run(start.range, start.offset, set[start.range].size() - 1);
    if (!first || *first) return first;
    for (size_t k = 1; k < n; ++k) {
        const size_t r = (start.range + k) % n;
        auto res = run(r, 0, set[r].size() - 1);
        if (!res || *res) return res;
    }
    if (start.offset > 0) return run(start.range, 0, start.offset - 1);
    return false;
}

}  // namespace

Expected<ClaimedSlot> claim_next(ClaimContext& ctx, const RangeSet& set, size_t set_index) {
    uint64_t& cursor = ctx.store.index().header().cursor[set_index];
    for (int attempt = 0; attempt < 8; ++attempt) {
        const Position start =
            decode_cursor(shm::load_word(cursor, std::memory_order_relaxed), set);
        std::optional<ClaimedSlot> got;
        std::optional<Cooling> oldest;
        bool healed_any = false;
        for (Pass pass : {Pass::kHinted, Pass::kExhaustive}) {
            auto res = walk_set(
                ctx.store, set, start, pass,
                [&](shm::BlockFile& b, uint64_t s, const IpAddress& a, size_t r) -> bool {
                    const uint64_t w = slot_ops::load_state(b, s);
                    const SlotWord sw = SlotWord::decode(w);
                    if (sw.state == SlotState::kCooling) {
                        const uint64_t released = shm::load_word(b.slot(s).changed_boot_ns);
                        const bool expired = released > ctx.now_boot_ns ||
                                             ctx.now_boot_ns - released >= ctx.reuse_delay_ns;
                        if (!expired) {
                            if (!oldest || released < oldest->released_ns) {
                                oldest = Cooling{&b, s, w, released, a, r};
                            }
                            return false;
                        }
                    } else if (sw.state != SlotState::kFree) {
                        if (pass == Pass::kHinted) {
                            slot_ops::sync_hint(b, s);  // stale hint
                        } else if (heal_slot_if_orphaned(ctx.store, b, s, w)) {
                            // Left by an invocation that is gone: it is FREE or COOLING now and
                            // the next attempt sees it.
                            healed_any = true;
                        }
                        return false;
                    }
                    ctx.before_claim(a);
                    uint64_t claimed = 0;
                    if (!slot_ops::claim(b, s, w, ctx.lease, &claimed)) return false;
                    got = ClaimedSlot{&b, s, claimed, a};
                    shm::store_word(cursor, encode_cursor(r, a.value - set[r].start.value + 1),
                                    std::memory_order_relaxed);
                    return true;
                });
            if (!res) return res.error();
            if (got) return *got;
        }
        // Only cooling addresses are left: take the one released longest ago.
        if (oldest) {
            ctx.before_claim(oldest->address);
            uint64_t claimed = 0;
            if (slot_ops::claim(*oldest->block, oldest->slot, oldest->word, ctx.lease, &claimed)) {
                shm::store_word(
                    cursor,
                    encode_cursor(oldest->range,
                                  oldest->address.value - set[oldest->range].start.value + 1),
                    std::memory_order_relaxed);
                return ClaimedSlot{oldest->block, oldest->slot, claimed, oldest->address};
            }
            continue;  // lost it to someone else: look again
        }
        if (healed_any) continue;
        return make_error(Code::kNoAddressFree,
                          "no IP addresses available in range set " + to_string(set));
    }
    return make_error(Code::kTryAgainLater,
                      "address claims kept racing in range set " + to_string(set));
}

Expected<ClaimedSlot> claim_requested(ClaimContext& ctx, const RangeSet& set,
                                      const IpAddress& address) {
    auto block = ctx.store.block_for(address, true);
    if (!block) return block.error();
    shm::BlockFile& b = **block;
    const uint64_t s = ctx.store.slot_of(address);
    for (int attempt = 0; attempt < 100; ++attempt) {
        const uint64_t w = slot_ops::load_state(b, s);
        const SlotWord sw = SlotWord::decode(w);
        if (sw.state == SlotState::kClaiming || sw.state == SlotState::kReleasing) {
            // Someone is mid-transition: if they are gone, heal and look again; if they are
            // alive the address may be free in a moment, so the caller should retry.
            if (heal_slot_if_orphaned(ctx.store, b, s, w)) continue;
            return make_error(Code::kTryAgainLater, "requested IP address " + address.to_string() +
                                                        " is changing hands right now");
        }
        if (sw.state != SlotState::kFree && sw.state != SlotState::kCooling) {
            return make_error(Code::kRequestedAddressTaken,
                              "requested IP address " + address.to_string() +
                                  " is not available in range set " + to_string(set));
        }
        ctx.before_claim(address);
        uint64_t claimed = 0;
        if (slot_ops::claim(b, s, w, ctx.lease, &claimed)) {
            return ClaimedSlot{&b, s, claimed, address};
        }
    }
    return make_error(Code::kTryAgainLater,
                      "requested IP address " + address.to_string() + " kept changing hands");
}

uint64_t cursor_after(const RangeSet& set, const IpAddress& last) {
    auto r = range_index_for(set, last);
    if (!r) return 0;
    return encode_cursor(*r, last.value - set[*r].start.value + 1);
}

Expected<bool> can_serve(NetworkStore& store, const RangeSet& set) {
    bool found = false;
    for (size_t r = 0; r < set.size() && !found; ++r) {
        const Range& range = set[r];
        const int host_bits = family_bits(range.family()) - store.block_prefix(range.family());
        const u128 block_mask = (u128{1} << host_bits) - 1;
        u128 a = range.start.value;
        for (;;) {
            const u128 base = a & ~block_mask;
            const u128 seg_hi = std::min(range.end.value, base | block_mask);
            auto block = store.block_for(IpAddress{base, range.family()}, false);
            if (!block) return block.error();
            for (u128 v = a; !found; ++v) {
                const IpAddress addr{v, range.family()};
                if (!excluded_in_set(set, addr)) {
                    if (*block == nullptr) {
                        found = true;  // a block nobody created yet is all free
                    } else {
                        const auto st =
                            SlotWord::decode(slot_ops::load_state(**block, uint64_t(v - base)))
                                .state;
                        found = st == SlotState::kFree || st == SlotState::kCooling;
                    }
                }
                if (v == seg_hi) break;
            }
            if (found || seg_hi >= range.end.value) break;
            a = seg_hi + 1;
        }
    }
    return found;
}

}  // namespace shmipam::engine
