#include <bit>

#include "engine/inspect/inspect.h"
#include "engine/slots/slot_ops.h"
#include "shm/atomic_word.h"
#include "shm/codec.h"

namespace shmipam::engine {

Expected<uint64_t> hinted_taken(NetworkStore& store, const IpAddress& first,
                                const IpAddress& last) {
    const Family fam = first.family;
    const int bits = fam == Family::kV4 ? 32 : 128;
    const int prefix = store.block_prefix(fam);
    const u128 block_mask = prefix >= bits ? u128{0} : (u128{1} << (bits - prefix)) - 1;
    uint64_t taken = 0;
    for (u128 a = first.value; a <= last.value;) {
        const u128 base = a & ~block_mask;
        const u128 seg_last = std::min(last.value, base | block_mask);
        auto block = store.block_for(IpAddress{base, fam}, /*create=*/false);
        if (!block) return block.error();
        if (*block != nullptr) {
            const uint64_t* bitmap = (*block)->bitmap();
            for (uint64_t s = uint64_t(a - base), s_last = uint64_t(seg_last - base);
                 s <= s_last;) {
                uint64_t word = shm::load_word(bitmap[s / 64], std::memory_order_relaxed);
                word &= ~uint64_t{0} << (s % 64);
                const uint64_t word_last = s / 64 * 64 + 63;
                if (s_last < word_last) word &= ~uint64_t{0} >> (63 - s_last % 64);
                taken += uint64_t(std::popcount(word));
                s = word_last + 1;
            }
        }
        if (seg_last == last.value) break;
        a = seg_last + 1;
    }
    return taken;
}

Expected<uint64_t> in_use_in_block(NetworkStore& store, const IpAddress& a) {
    auto block = store.block_for(a, /*create=*/false);
    if (!block) return block.error();
    if (*block == nullptr) return uint64_t{0};
    uint64_t n = 0;
    for (uint64_t i = 0; i < (*block)->slot_count(); ++i) {
        const auto state = shm::SlotWord::decode(slot_ops::load_state(**block, i)).state;
        // A slot being claimed is not counted: it may be a dead process's, which nothing here
        // heals (the release's hold re-checks every slot, live claims included).
        n += state != format::SlotState::kFree && state != format::SlotState::kCooling &&
             state != format::SlotState::kClaiming;
    }
    return n;
}

}  // namespace shmipam::engine
