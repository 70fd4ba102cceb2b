// Cluster mode's block release: a block is given back to the cluster store only while every one
// of its slots is held by the releasing operation, so no ADD can take an address of it between
// the emptiness check and the store's delete (docs/cluster.md, "Giving a block back").
#include "base/clock.h"
#include "engine/ops/allocator.h"
#include "engine/ops/lease_guard.h"
#include "engine/recovery/recovery.h"
#include "engine/slots/slot_ops.h"

namespace shmipam::engine {

using format::SlotState;
using shm::SlotWord;

Expected<Allocator::BlockEmptiness> Allocator::while_block_empty(
    const IpAddress& base, const std::function<Status()>& give_back) {
    LeaseGuard guard(store_);
    if (auto st = guard.acquire(); !st) return st.error();
    auto block = store_.block_for(base, /*create=*/true);
    if (!block) return block.error();
    shm::BlockFile& b = **block;
    std::vector<std::pair<uint64_t, uint64_t>> held;  // slot, its CLAIMING word
    const auto let_go = [&] {
        for (const auto& [i, w] : held) slot_ops::roll_back(b, i, w);
    };
    const uint64_t now = base::boot_ns();
    const uint64_t delay_ns = cfg_.reuse_delay_ms * 1'000'000;
    BlockEmptiness out;
    for (uint64_t i = 0; i < b.slot_count(); ++i) {
        uint64_t claimed = 0;
        for (int look = 0;; ++look) {
            const uint64_t w = slot_ops::load_state(b, i);
            const SlotState state = SlotWord::decode(w).state;
            if (state == SlotState::kCooling) {
                const uint64_t since = shm::load_word(b.slot(i).changed_boot_ns);
                if (since <= now && now - since < delay_ns) {
                    out.cooling_left_ms =
                        std::max(out.cooling_left_ms, (delay_ns - (now - since)) / 1'000'000 + 1);
                    break;
                }
            } else if (state != SlotState::kFree) {
                // Work a dead process left (a claim, a release, an earlier fence) is healed
                // first; anything else is in use.
                if (look == 0 && heal_slot_if_orphaned(store_, b, i, w)) continue;
                out.in_use = true;
                break;
            }
            if (slot_ops::claim(b, i, w, guard.handle(), &claimed)) {
                held.emplace_back(i, claimed);
                break;
            }
            // Changed under us (an ADD took it, or a healer moved it): look again.
        }
        if (out.in_use || out.cooling_left_ms != 0) {
            let_go();
            return out;
        }
    }
    Status st = give_back();
    let_go();
    if (!st) return st.error();
    out.ran = true;
    return out;
}

}  // namespace shmipam::engine
