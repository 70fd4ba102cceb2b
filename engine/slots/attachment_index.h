// The attachment index: an open-addressing hash table of entries keyed by the attachment's
// fingerprint, in the network's index file. An ADD claims its attachment's entry before any
// address, so two concurrent ADDs for one attachment can never both take addresses: one of them
// sees the other's entry and backs off (code 11). DEL finds the entry in O(1) expected probes.
//
// Probes are bounded by the header's max_probe (raised before any insert's CAS), not by empty
// entries, so tombstones can be reused by any insert without breaking lookups.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "engine/addr/fingerprint.h"
#include "shm/codec.h"
#include "shm/index_file.h"

namespace shmipam::engine {

struct EntryRef {
    uint64_t index = 0;
    uint64_t word = 0;  // the state word as observed
};

enum class ClaimKind { kClaimed, kExisting, kBusy, kFull };

struct EntryClaim {
    ClaimKind kind = ClaimKind::kFull;
    EntryRef entry;  // kClaimed: ours (CLAIMING); kExisting: the committed one
};

class AttachmentIndex {
  public:
    // Given an entry observed CLAIMING or RELEASING (index, word): if the invocation driving it
    // is gone, heals it and returns true (the caller then looks again).
    using ReapIfDead = std::function<bool(uint64_t entry_index, uint64_t entry_word)>;

    AttachmentIndex(shm::IndexFile& index, ReapIfDead reap)
        : index_(index), reap_(std::move(reap)) {}

    // For an ADD: the committed entry of this attachment, or a fresh CLAIMING entry of ours, or
    // kBusy when another live invocation is working on the same attachment.
    EntryClaim claim(const Fingerprint& fp, const shm::LeaseHandle& lease);

    // Every entry of this attachment that is not empty or a tombstone. `unsettled` (if given)
    // is set when a live entry with the same short fingerprint (fp16) was claimed by an
    // invocation still alive that had not stamped its fingerprint within kStampWaitNs: it may be
    // this attachment's, so a DEL must not answer as if it were absent.
    std::vector<EntryRef> find(const Fingerprint& fp, bool* unsettled = nullptr);
    // How long a reader waits for a live claimer to stamp its entry's fingerprint.
    static constexpr uint64_t kStampWaitNs = 50'000'000;

    // CLAIMING (ours) -> COMMITTED.
    bool commit(const EntryRef& e, const Fingerprint& fp);
    // COMMITTED -> RELEASING by the lease (the lease's target must already name e).
    bool begin_release(const EntryRef& e, const shm::LeaseHandle& lease, uint64_t* releasing_word);
    // CLAIMING / RELEASING -> TOMBSTONE.
    bool retire(uint64_t index, uint64_t expected);

    format::Entry& entry(uint64_t i) { return index_.entry(i); }
    uint64_t bucket(const Fingerprint& fp) const { return fp.fp1 & (index_.entry_count() - 1); }

    // The fingerprint of an entry whose state word is `word`; nullopt when its fingerprint is
    // not (yet) the one of that word's tenant.
    static std::optional<Fingerprint> read_fp(const format::Entry& e, uint64_t word);
    static uint64_t stamped_fp1(uint64_t word, const Fingerprint& fp);

  private:
    bool transition(uint64_t index, uint64_t expected, uint64_t desired);
    // Loads an entry's fingerprint, waiting out the moment between its owner's CAS and its store
    // of fp1 (or reaping the owner if it died there). No fingerprint: the entry changed meanwhile,
    // or (unsettled) its live owner had not stamped it within kStampWaitNs.
    struct Settled {
        std::optional<Fingerprint> fp;
        bool unsettled = false;
    };
    Settled settled_fp(uint64_t i, uint64_t word);
    bool same_attachment(uint64_t i, uint64_t word, const Fingerprint& fp, bool* unsettled);

    shm::IndexFile& index_;
    ReapIfDead reap_;
};

}  // namespace shmipam::engine
