// docs/format.md's worked example, checked: one dual-stack ADD and its DEL on a new network,
// every shared word they touch read before, after the ADD and after the DEL, and compared with
// the doc's table (between the worked-example markers). A change to the codec, the protocol or
// the doc that makes them disagree fails here. SHMIPAM_PRINT_EXAMPLE=1 prints the table as the
// code makes it, to paste into the doc after an intended change.
#include <gtest/gtest.h>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "engine/addr/fingerprint.h"
#include "shm/atomic_word.h"
#include "tests/support/network_fixture.h"

namespace shmipam::engine {
namespace {

struct Row {
    std::string word, before, after_add, after_del;
};

std::string trim(std::string s) {
    const auto b = s.find_first_not_of(" `");
    const auto e = s.find_last_not_of(" `");
    return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

// The rows of the doc's table: "| word | before | after ADD | after DEL | meaning |".
std::vector<Row> doc_rows() {
    std::ifstream in(SHMIPAM_SOURCE_DIR "/docs/format.md");
    std::vector<Row> rows;
    bool inside = false;
    for (std::string line; std::getline(in, line);) {
        if (line.find("<!-- worked-example:begin -->") != std::string::npos) inside = true;
        if (line.find("<!-- worked-example:end -->") != std::string::npos) break;
        if (!inside || line.rfind("| `", 0) != 0) continue;
        std::vector<std::string> cells;
        std::stringstream ss(line.substr(1));
        for (std::string c; std::getline(ss, c, '|');) cells.push_back(trim(c));
        if (cells.size() >= 4) rows.push_back({cells[0], cells[1], cells[2], cells[3]});
    }
    return rows;
}

std::string hex(uint64_t v) {
    char b[24];
    std::snprintf(b, sizeof b, "%016" PRIx64, v);
    return b;
}

TEST(FormatExample, TheDocsWorkedExampleIsWhatADualStackAddAndDelWrite) {
    testing::TempDir dir;
    auto cfg = testing::network_config(dir, {testing::range_set({{"10.1.0.0/24", "", "", ""}}),
                                             testing::range_set({{"fd01::/120", "", "", ""}})});
    auto store = testing::open_store(cfg);
    ASSERT_TRUE(store);
    Allocator alloc(*store, cfg);
    shm::IndexFile& idx = store->index();
    const Fingerprint fp = fingerprint("example", "eth0");
    const uint64_t e = fp.fp1 & (idx.entry_count() - 1);  // a new index: no probing
    // The lease an invocation of this process takes first (lease_table.cpp: pid * 7919 mod n).
    const uint32_t lease = uint32_t(uint64_t(store->self().pid) * 7919u % idx.leases().size());
    auto slot = [&](const char* a) -> format::Slot& {
        const IpAddress ip = *IpAddress::parse(a);
        return (*store->block_for(ip, true))->slot(store->slot_of(ip));
    };
    // Every word the example shows, by the name the doc gives it.
    std::vector<std::pair<std::string, std::function<uint64_t()>>> words{
        {"entry[E].state", [&] { return shm::load_word(idx.entry(e).state); }},
        {"entry[E].fp1", [&] { return shm::load_word(idx.entry(e).fp1); }},
        {"entry[E].fp2", [&] { return shm::load_word(idx.entry(e).fp2); }},
        {"slot(10.1.0.2).state", [&] { return shm::load_word(slot("10.1.0.2").state); }},
        {"slot(10.1.0.2).owner", [&] { return shm::load_word(slot("10.1.0.2").owner); }},
        {"slot(fd01::2).state", [&] { return shm::load_word(slot("fd01::2").state); }},
        {"slot(fd01::2).owner", [&] { return shm::load_word(slot("fd01::2").owner); }},
        {"lease[L]", [&] { return idx.leases().word(lease); }},
        {"lease[L].target", [&] { return idx.leases().target(lease); }},
        {"lease[L].journal_intent",
         [&] { return shm::load_word(idx.leases().intent_word(lease)); }},
        {"cursor[0]", [&] { return shm::load_word(idx.header().cursor[0]); }},
        {"cursor[1]", [&] { return shm::load_word(idx.header().cursor[1]); }},
        {"journal_tail", [&] { return shm::load_word(idx.header().journal_tail); }},
        {"adds", [&] { return shm::load_word(idx.header().adds); }},
        {"dels", [&] { return shm::load_word(idx.header().dels); }},
    };
    // Journal records carry times and checksums that differ run to run: the example shows each
    // record's op and slot generation, packed as op << 32 | slot_gen (0: not written yet).
    auto record = [&](uint64_t sequence) -> uint64_t {
        auto scan = shm::Journal::scan(store->journal().dir());
        if (!scan) return ~uint64_t{0};
        for (const auto& r : scan->records) {
            if (r.sequence == sequence) return uint64_t(r.op) << 32 | r.slot_gen;
        }
        return 0;
    };
    // A new index appends from the segment past its checkpoint's (format.h): records 4096 on.
    for (uint64_t n = format::kJournalRecordsPerSegment; n < format::kJournalRecordsPerSegment + 4;
         ++n) {
        words.push_back({"record[" + std::to_string(n) + "]", [&record, n] { return record(n); }});
    }
    std::vector<Row> seen;
    for (const auto& [name, read] : words) seen.push_back({name, hex(read()), "", ""});
    ASSERT_TRUE(alloc.add(testing::add_request("example")));
    for (size_t i = 0; i < words.size(); ++i) seen[i].after_add = hex(words[i].second());
    ASSERT_TRUE(alloc.del({"example", "eth0"}));
    for (size_t i = 0; i < words.size(); ++i) seen[i].after_del = hex(words[i].second());

    if (std::getenv("SHMIPAM_PRINT_EXAMPLE") != nullptr) {
        for (const Row& r : seen) {
            std::printf("| `%s` | `%s` | `%s` | `%s` | |\n", r.word.c_str(), r.before.c_str(),
                        r.after_add.c_str(), r.after_del.c_str());
        }
    }
    const std::vector<Row> doc = doc_rows();
    ASSERT_EQ(doc.size(), seen.size()) << "the doc's worked-example table has other rows";
    for (size_t i = 0; i < seen.size(); ++i) {
        SCOPED_TRACE(seen[i].word);
        EXPECT_EQ(doc[i].word, seen[i].word);
        EXPECT_EQ(doc[i].before, seen[i].before);
        EXPECT_EQ(doc[i].after_add, seen[i].after_add);
        EXPECT_EQ(doc[i].after_del, seen[i].after_del);
    }
}

}  // namespace
}  // namespace shmipam::engine
