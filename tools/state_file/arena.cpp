// Describing an index or a block arena (describe.h): magic and version must be right to read
// on, a header checksum mismatch is reported and the rest still read (its geometry must still
// fit the file), and every item that is not free becomes a line.
#include <algorithm>
#include <cstring>

#include "engine/inspect/inspect.h"
#include "shm/block_file.h"
#include "shm/codec.h"
#include "shm/crc32c.h"
#include "shm/index_file.h"
#include "shm/layout_fingerprint.h"
#include "shm/lease_table.h"
#include "tools/state_file/describe.h"

namespace shmipam::tools::state_file {

namespace {

using format::EntryState;
using format::SlotState;

// Magic and version: without them the bytes mean nothing to this reader.
template <typename Header>
Status check_identity(std::span<const std::byte> bytes, const char (&magic)[8], const char* kind) {
    if (bytes.size() < sizeof(Header)) {
        return make_error(Code::kArenaDamaged,
                          "truncated: " + std::to_string(bytes.size()) + " bytes, less than the " +
                              std::to_string(sizeof(Header)) + "-byte header of " + kind);
    }
    const auto* h = reinterpret_cast<const Header*>(bytes.data());
    if (std::memcmp(h->magic, magic, 8) != 0) {
        return make_error(Code::kArenaForeign, std::string("not ") + kind + ": magic is \"" +
                                                   text_of(h->magic, 8) + "\", not \"" +
                                                   std::string(magic, 8) + "\"");
    }
    if (h->version != format::kFormatVersion) {
        return make_error(Code::kArenaVersion, std::string(kind) + " of format version " +
                                                   std::to_string(h->version) +
                                                   "; this shmipamctl reads version " +
                                                   std::to_string(format::kFormatVersion));
    }
    if (h->layout != format::kLayoutFingerprint) {
        return make_error(Code::kArenaVersion,
                          std::string(kind) + " written by a build with another layout of format " +
                              std::to_string(h->version) + " (" + hex(h->layout, 8) +
                              "; this shmipamctl's is " + hex(format::kLayoutFingerprint, 8) + ")");
    }
    return Ok{};
}

template <typename Header>
void check_crc(const Header& h, FileDescription& d) {
    const uint32_t crc = shm::crc32c(&h, offsetof(Header, header_crc));
    if (crc != h.header_crc) {
        d.header_damage.push_back("header checksum mismatch (stored " + hex(h.header_crc, 8) +
                                  ", computed " + hex(crc, 8) + ")");
    }
}

const char* entry_state_name(EntryState s) {
    switch (s) {
        case EntryState::kEmpty:
            return "empty";
        case EntryState::kClaiming:
            return "claiming";
        case EntryState::kCommitted:
            return "committed";
        case EntryState::kReleasing:
            return "releasing";
        case EntryState::kTombstone:
            return "tombstone";
    }
    return nullptr;
}

FileItem lease_item(uint32_t i, uint64_t word, const format::LeaseSide& side, uint64_t offset) {
    FileItem it{"lease", i, offset, {}, {}};
    it.fields = {{"pid", uint64_t(shm::LeaseTable::pid_of(word))},
                 {"gen", uint64_t(shm::LeaseTable::gen_of(word))},
                 {"start", shm::LeaseWord::start_of(word)}};
    if (const uint64_t t = side.target; shm::LeaseTarget::entry_plus_one(t) != 0) {
        it.fields.push_back(
            {"target", "entry " + std::to_string(shm::LeaseTarget::entry_plus_one(t) - 1) +
                           " gen " + std::to_string(shm::LeaseTarget::entry_gen(t))});
    }
    return it;
}

FileItem entry_item(uint64_t i, const format::Entry& e, uint64_t offset) {
    const auto w = shm::EntryWord::decode(e.state);
    FileItem it{"entry", i, offset, {}, {}};
    const char* name = entry_state_name(w.state);
    if (name == nullptr) {
        it.damage = "invalid state " + std::to_string(int(w.state));
        return it;
    }
    it.fields = {{"state", std::string(name)}, {"gen", uint64_t(w.gen)}};
    if (w.state == EntryState::kClaiming || w.state == EntryState::kReleasing) {
        it.fields.push_back({"lease", uint64_t(w.lease_index)});
    }
    it.fields.push_back({"container", text_of(e.container_id, sizeof e.container_id)});
    it.fields.push_back({"ifname", text_of(e.ifname, sizeof e.ifname)});
    std::string addrs;
    for (size_t r = 0; r < format::kMaxRangeSets && r < e.ref_count; ++r) {
        if (e.refs[r].family == 0) continue;  // not claimed yet
        addrs += (addrs.empty() ? "" : ",") + address_of(e.refs[r].family, e.refs[r].address);
    }
    it.fields.push_back({"addresses", addrs});
    if (e.pod[0] != '\0') it.fields.push_back({"pod", text_of(e.pod, sizeof e.pod)});
    if (e.flags & format::kEntryFlagImported) it.fields.push_back({"imported", uint64_t(1)});
    if (e.flags & format::kEntryFlagClaim) it.fields.push_back({"claim", uint64_t(1)});
    if (e.flags & format::kEntryFlagPartial) it.fields.push_back({"partial", uint64_t(1)});
    it.fields.push_back({"created", utc(e.created_unix_ns)});
    return it;
}

FileItem slot_item(uint64_t i, const format::Slot& s, const std::string& address, uint64_t offset) {
    const auto w = shm::SlotWord::decode(s.state);
    FileItem it{"slot", i, offset, {{"address", address}}, {}};
    const char* name = engine::slot_state_name(w.state);
    if (std::strcmp(name, "invalid") == 0) {
        it.damage = "invalid state " + std::to_string(int(w.state));
        return it;
    }
    it.fields.push_back({"state", std::string(name)});
    it.fields.push_back({"gen", uint64_t(w.gen)});
    if (w.state == SlotState::kAllocated) {
        it.fields.push_back({"owner", "entry " + std::to_string(w.owner_entry()) + " tenancy " +
                                          std::to_string(w.owner_tenancy())});
        it.fields.push_back({"range_set", uint64_t(shm::SlotOwner::range_set(s.owner))});
        it.fields.push_back({"owner_fp", hex(s.owner_fp)});
        it.fields.push_back({"allocated", utc(s.allocated_unix_ns)});
    } else if (w.state == SlotState::kClaiming || w.state == SlotState::kReleasing) {
        it.fields.push_back({"lease", uint64_t(w.lease_index)});
    } else if (w.state == SlotState::kCooling) {
        it.fields.push_back({"released_boot_ns", s.changed_boot_ns});
    }
    return it;
}

}  // namespace

Expected<FileDescription> describe_index(std::span<const std::byte> bytes) {
    if (auto st = check_identity<format::IndexHeader>(bytes, format::kIndexMagic, "an index");
        !st) {
        return st.error();
    }
    format::IndexHeader h;
    std::memcpy(&h, bytes.data(), sizeof h);  // a copy: a live file may change under us
    FileDescription d;
    d.kind = "index";
    check_crc(h, d);
    const bool pow2 = h.entry_count != 0 && (h.entry_count & (h.entry_count - 1)) == 0;
    const shm::IndexGeometry g{h.entry_count, h.block_prefix_v4, h.block_prefix_v6};
    const uint64_t lease_bytes = format::kLeaseCount * (8 + sizeof(format::LeaseSide));
    if (!pow2 || h.entry_bytes != sizeof(format::Entry) || h.lease_count != format::kLeaseCount ||
        h.lease_offset != format::kHeaderBytes ||
        h.entries_offset != format::kHeaderBytes + lease_bytes ||
        h.file_bytes != shm::IndexFile::file_bytes_for(g) || h.file_bytes != bytes.size()) {
        return make_error(Code::kArenaDamaged,
                          "index geometry does not fit the file (" + std::to_string(bytes.size()) +
                              " bytes; the header says " + std::to_string(h.file_bytes) +
                              " bytes, " + std::to_string(h.entry_count) +
                              " entries): truncated or damaged");
    }
    std::string ranges;
    if (h.ranges_seq % 2 == 0) ranges = text_of(h.ranges_text, sizeof h.ranges_text);
    d.header = {{"version", uint64_t(h.version)},
                {"layout", hex(h.layout, 8)},
                {"network", text_of(h.network, sizeof h.network)},
                {"data_dir", text_of(h.data_dir, sizeof h.data_dir)},
                {"epoch", hex(h.epoch)},
                {"created", utc(h.created_unix_ns)},
                {"boot_id", uuid(h.boot_id)},
                {"entry_count", h.entry_count},
                {"lease_count", h.lease_count},
                {"block_prefix_v4", uint64_t(h.block_prefix_v4)},
                {"block_prefix_v6", uint64_t(h.block_prefix_v6)},
                {"file_bytes", h.file_bytes},
                {"retired", h.retired},
                {"max_probe", h.max_probe},
                {"adds", h.adds},
                {"dels", h.dels},
                {"dead_leases_reaped", h.dead_leases_reaped},
                {"busy_rejections", h.busy_rejections},
                {"reboot_reclaims", h.reboot_reclaims},
                {"rebuild_skipped_records", h.rebuild_skipped_records},
                {"journal_tail", h.journal_tail},
                {"journal_names_durable", h.journal_names_durable},
                {"reuse_delay_ms", h.reuse_delay_ms},
                {"ranges", ranges}};
    uint64_t held = 0, live = 0, tombstones = 0, empty = 0;
    for (uint32_t i = 0; i < h.lease_count; ++i) {
        const uint64_t off = h.lease_offset + uint64_t(i) * 8;
        uint64_t word;
        std::memcpy(&word, bytes.data() + off, 8);
        if (shm::LeaseTable::pid_of(word) == 0) continue;
        ++held;
        const uint64_t side_off =
            h.lease_offset + h.lease_count * 8 + uint64_t(i) * sizeof(format::LeaseSide);
        format::LeaseSide side;
        std::memcpy(&side, bytes.data() + side_off, sizeof side);
        d.items.push_back(lease_item(i, word, side, off));
    }
    for (uint64_t i = 0; i < h.entry_count; ++i) {
        const uint64_t off = h.entries_offset + i * sizeof(format::Entry);
        format::Entry e;
        std::memcpy(&e, bytes.data() + off, sizeof e);
        const auto state = shm::EntryWord::decode(e.state).state;
        if (state == EntryState::kEmpty) {
            ++empty;
        } else if (state == EntryState::kTombstone) {
            ++tombstones;  // released: counted, not listed (a busy index has many)
        } else {
            ++live;
            d.items.push_back(entry_item(i, e, off));
        }
    }
    d.summary = {{"held_leases", held},
                 {"live_entries", live},
                 {"tombstones", tombstones},
                 {"empty_entries", empty}};
    return d;
}

Expected<FileDescription> describe_block(std::span<const std::byte> bytes) {
    if (auto st = check_identity<format::BlockHeader>(bytes, format::kBlockMagic, "a block"); !st) {
        return st.error();
    }
    format::BlockHeader h;
    std::memcpy(&h, bytes.data(), sizeof h);
    FileDescription d;
    d.kind = "block";
    check_crc(h, d);
    shm::BlockGeometry g;
    g.family = h.family;
    g.prefix = h.prefix;
    std::memcpy(g.base.data(), h.base, 16);
    const int bits = h.family == 4 ? 32 : h.family == 6 ? 128 : 0;
    if (bits == 0 || h.prefix > bits || bits - h.prefix > 24 || h.slot_count != g.slot_count() ||
        h.slot_bytes != sizeof(format::Slot) || h.bitmap_offset != format::kHeaderBytes ||
        h.file_bytes != shm::BlockFile::file_bytes_for(g) ||
        h.slots_offset != h.file_bytes - h.slot_count * sizeof(format::Slot) ||
        h.file_bytes != bytes.size()) {
        return make_error(Code::kArenaDamaged,
                          "block geometry does not fit the file (" + std::to_string(bytes.size()) +
                              " bytes; the header says " + std::to_string(h.file_bytes) +
                              " bytes, family " + std::to_string(h.family) + " /" +
                              std::to_string(h.prefix) + "): truncated or damaged");
    }
    d.header = {{"version", uint64_t(h.version)},
                {"layout", hex(h.layout, 8)},
                {"network", text_of(h.network, sizeof h.network)},
                {"data_dir", text_of(h.data_dir, sizeof h.data_dir)},
                {"block", address_of(h.family, h.base) + "/" + std::to_string(h.prefix)},
                {"created", utc(h.created_unix_ns)},
                {"boot_id", uuid(h.boot_id)},
                {"slot_count", h.slot_count},
                {"file_bytes", h.file_bytes},
                {"retired", h.retired},
                {"claims", h.claims},
                {"releases", h.releases},
                {"cas_retries", h.cas_retries},
                {"rollbacks", h.rollbacks}};
    uint64_t counts[8] = {};
    for (uint64_t i = 0; i < h.slot_count; ++i) {
        const uint64_t off = h.slots_offset + i * sizeof(format::Slot);
        format::Slot s;
        std::memcpy(&s, bytes.data() + off, sizeof s);
        const auto state = shm::SlotWord::decode(s.state).state;
        ++counts[std::min<size_t>(size_t(state), 7)];
        if (state == SlotState::kFree) continue;
        d.items.push_back(slot_item(i, s, address_at(h.family, h.base, i), off));
    }
    d.summary = {{"allocated", counts[2]},
                 {"cooling", counts[4]},
                 {"transient", counts[1] + counts[3]},
                 {"other", counts[5] + counts[6] + counts[7]},
                 {"free", counts[0]}};
    return d;
}

}  // namespace shmipam::tools::state_file
