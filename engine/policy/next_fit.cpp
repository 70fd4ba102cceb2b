#include "engine/policy/next_fit.h"

#include <optional>

#include "engine/slots/slot_ops.h"
#include "shm/atomic_word.h"

namespace shmipam::engine {

using format::SlotState;
using shm::SlotWord;

namespace {

// Searches of one range set an ADD makes before answering 11. A search is repeated only after
// losing the oldest cooling address to a racer or healing a slot (another process's progress),
// and each walks the whole set, so a few cover a node's ADDs racing for its last addresses.
constexpr int kNextFitSearches = 8;
// Looks at a requested address before answering 11: each repeat follows a lost slot claim or a
// healed slot of a dead driver (another process's progress), and a look is one slot read.
constexpr int kRequestedAddressLooks = 100;

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

// Offers every claimable address of the set once, in next-fit order: from `start` to the end
// of its range, through the other ranges, then wrapping around to just before `start`.
Expected<ScanResult> scan_set(SlotScanner& scanner, const RangeSet& set, Position start,
                              ScanPass pass, CandidateVisitor visit) {
    ScanResult total;
    auto run = [&](size_t r, u128 from, u128 to) -> Expected<bool> {
        auto res = scanner.scan(set, r, from, to, pass, visit);
        if (!res) return res.error();
        total.healed += res->healed;
        total.stopped = res->stopped;
        return res->stopped;
    };
    const size_t n = set.size();
    for (size_t k = 0; k <= n; ++k) {
        const size_t r = (start.range + k) % n;
        const bool wrapped = k == n;  // back at the start's range, before the start
        if (wrapped && start.offset == 0) break;
        auto stopped = k == 0    ? run(r, start.offset, set[r].size() - 1)
                       : wrapped ? run(r, 0, start.offset - 1)
                                 : run(r, 0, set[r].size() - 1);
        if (!stopped) return stopped.error();
        if (*stopped) break;
    }
    return total;
}

}  // namespace

Expected<ClaimedSlot> claim_next(ClaimContext& ctx, const RangeSet& set, size_t set_index) {
    uint64_t& cursor = ctx.cursors[set_index];
    auto take = [&](const Candidate& c) -> std::optional<ClaimedSlot> {
        ctx.before_claim(c.address);
        uint64_t claimed = 0;
        if (!ctx.scanner.try_claim(c, &claimed)) return std::nullopt;
        shm::store_word(cursor,
                        encode_cursor(c.range, c.address.value - set[c.range].start.value + 1),
                        std::memory_order_relaxed);
        return ClaimedSlot{c.block, c.slot, claimed, c.address};
    };
    for (int attempt = 0; attempt < kNextFitSearches; ++attempt) {
        const Position start =
            decode_cursor(shm::load_word(cursor, std::memory_order_relaxed), set);
        std::optional<ClaimedSlot> got;
        std::optional<Candidate> oldest;  // of the addresses still cooling
        size_t healed = 0;
        for (ScanPass pass : {ScanPass::kHinted, ScanPass::kExhaustive}) {
            auto res = scan_set(ctx.scanner, set, start, pass, [&](const Candidate& c) {
                if (c.state == SlotState::kCooling) {
                    const bool expired = c.released_boot_ns > ctx.now_boot_ns ||
                                         ctx.now_boot_ns - c.released_boot_ns >= ctx.reuse_delay_ns;
                    if (!expired) {
                        if (!oldest || c.released_boot_ns < oldest->released_boot_ns) oldest = c;
                        return false;
                    }
                }
                got = take(c);
                return got.has_value();
            });
            if (!res) return res.error();
            if (got) return *got;
            healed += res->healed;
        }
        // Only cooling addresses are left: take the one released longest ago.
        if (oldest) {
            if (auto taken = take(*oldest)) return *taken;
            continue;  // lost it to someone else: look again
        }
        if (healed > 0) continue;  // healed slots are FREE or COOLING now: look again
        return make_error(Code::kNoAddressFree,
                          "no IP addresses available in range set " + to_string(set));
    }
    return make_error(Code::kTryAgainLater,
                      "address claims kept racing in range set " + to_string(set));
}

Expected<ClaimedSlot> claim_requested(ClaimContext& ctx, const RangeSet& set,
                                      const IpAddress& address) {
    for (int attempt = 0; attempt < kRequestedAddressLooks; ++attempt) {
        auto c = ctx.scanner.look(address);
        if (!c) return c.error();
        if (c->state == SlotState::kClaiming || c->state == SlotState::kReleasing) {
            // Someone is mid-transition: if they are gone, heal and look again; if they are
            // alive the address may be free in a moment, so the caller should retry.
            if (ctx.scanner.heal(*c)) continue;
            return make_error(Code::kTryAgainLater, "requested IP address " + address.to_string() +
                                                        " is changing hands right now");
        }
        if (c->state != SlotState::kFree && c->state != SlotState::kCooling) {
            return make_error(Code::kRequestedAddressTaken,
                              "requested IP address " + address.to_string() +
                                  " is not available in range set " + to_string(set));
        }
        ctx.before_claim(address);
        uint64_t claimed = 0;
        if (ctx.scanner.try_claim(*c, &claimed)) {
            return ClaimedSlot{c->block, c->slot, claimed, address};
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
