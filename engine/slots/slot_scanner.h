// The mechanism under an allocation policy, as host-local's Store.Reserve is under its
// RangeIter: the policy (engine/policy/) decides in which *order* to look and which candidate
// to take; the scanner decides *whether* an address can be had. It owns the bitmap walk, the
// reading of slot words, the slot CAS, and the healing of slots left mid-transition by an
// invocation that is gone (through a healer that recovery hands in). A policy is tested
// against a fake scanner, without an arena.
#pragma once

#include <cstdint>
#include <functional>

#include "base/function_ref.h"
#include "base/status.h"
#include "engine/addr/ip_address.h"
#include "engine/addr/range.h"
#include "engine/slots/block_map.h"
#include "shm/block_file.h"
#include "shm/codec.h"
#include "shm/lease_table.h"

namespace shmipam::engine {

// One address as the scanner read it.
struct Candidate {
    IpAddress address;
    size_t range = 0;  // which range of its set
    format::SlotState state = format::SlotState::kFree;
    uint64_t released_boot_ns = 0;  // COOLING: when its cool-down began (boot clock)
    // Where its slot is and the word it was read with: a claim succeeds only if the word is
    // still that one.
    shm::BlockFile* block = nullptr;
    uint64_t slot = 0;
    uint64_t word = 0;
};

// The hinted pass trusts the bitmap (a set bit: not claimable; stale bits met are fixed); the
// exhaustive pass reads every slot, so a stale hint never hides a free address, and heals the
// slots it finds left by an invocation that is gone.
enum class ScanPass { kHinted, kExhaustive };

struct ScanResult {
    bool stopped = false;  // the visitor took a candidate
    size_t healed = 0;     // slots healed (exhaustive pass): FREE or COOLING now, look again
};

// Called with each candidate; returns true to take it and stop the scan.
using CandidateVisitor = base::FunctionRef<bool(const Candidate&)>;

class SlotScanner {
  public:
    virtual ~SlotScanner() = default;
    // Offers, in address order, every claimable (FREE or COOLING) address of range `r` of `set`
    // at offsets [lo, hi] from the range's start, skipping addresses the set never hands out.
    // `visit` returns true to stop.
    virtual Expected<ScanResult> scan(const RangeSet& set, size_t r, u128 lo, u128 hi,
                                      ScanPass pass, CandidateVisitor visit) = 0;
    // One address in whatever state it is (a requested address); its block is created if it
    // does not exist yet (all free).
    virtual Expected<Candidate> look(const IpAddress& a) = 0;
    // Heals the candidate's slot if it was left mid-transition (or allocated to a tenancy that
    // ended) by an invocation that is gone. True: it changed, look again.
    virtual bool heal(const Candidate& c) = 0;
    // FREE or COOLING, as read -> CLAIMING by the lease. False: the word changed meanwhile.
    virtual bool try_claim(const Candidate& c, uint64_t* claimed_word) = 0;
};

// Heals one slot observed with `word` (engine/recovery's heal_slot_if_orphaned).
using SlotHealer = std::function<bool(shm::BlockFile& block, uint64_t slot, uint64_t word)>;

// The scanner over a network's real blocks, claiming for `lease`.
class ArenaScanner final : public SlotScanner {
  public:
    ArenaScanner(BlockMap& blocks, const shm::LeaseHandle& lease, SlotHealer heal)
        : blocks_(blocks), lease_(lease), heal_(std::move(heal)) {}

    Expected<ScanResult> scan(const RangeSet& set, size_t r, u128 lo, u128 hi, ScanPass pass,
                              CandidateVisitor visit) override;
    Expected<Candidate> look(const IpAddress& a) override;
    bool heal(const Candidate& c) override;
    bool try_claim(const Candidate& c, uint64_t* claimed_word) override;

  private:
    BlockMap& blocks_;
    const shm::LeaseHandle& lease_;
    SlotHealer heal_;
};

}  // namespace shmipam::engine
