// shmipamctl's verbs on arenas built by real plugin runs.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "engine/slots/attachment_index.h"
#include "engine/slots/slot_ops.h"
#include "engine/state/network_store.h"
#include "shm/atomic_word.h"
#include "shm/codec.h"
#include "shm/journal.h"
#include "tests/support/plugin_runner.h"
#include "tests/support/temp_dir.h"
#include "tests/support/wait_for.h"

namespace shmipam::testing {
namespace {

using nlohmann::json;

class Ctl : public ::testing::Test {
  protected:
    void SetUp() override {
        cfg = make_config(dir.path(), "ops", "1.1.0");
        cfg["ipam"]["ranges"] =
            json::parse(R"([[{"subnet":"10.91.0.0/23"}],[{"subnet":"fd91::/120"}]])");
        for (int i = 0; i < 40; ++i) add("c" + std::to_string(i), "p" + std::to_string(i));
    }
    void add(const std::string& id, const std::string& pod) {
        auto r = run_plugin(
            cni_env("ADD", id, "eth0", "IgnoreUnknown=1;K8S_POD_NAMESPACE=ns;K8S_POD_NAME=" + pod),
            cfg.dump());
        ASSERT_EQ(r.exit_code, 0) << r.out;
    }
    ProcessResult ctl(std::vector<std::string> args) {
        args.insert(args.begin(), {"--run-dir", dir.sub("run")});
        return run_ctl(args);
    }
    json ctl_json(std::vector<std::string> args) {
        auto r = ctl(std::move(args));
        EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
        return r.json();
    }
    std::unique_ptr<engine::NetworkStore> open_rw() {
        auto s = engine::NetworkStore::open_existing(dir.sub("run/ops"), shm::Access::kReadWrite);
        EXPECT_TRUE(s) << s.error().msg;
        return std::move(*s);
    }
    std::set<std::string> violation_kinds() {
        auto r = ctl({"verify", "ops", "--json"});
        EXPECT_EQ(r.exit_code, 1) << r.out;
        std::set<std::string> kinds;
        const json doc = r.json();
        for (const auto& v : doc["violations"]) kinds.insert(v["kind"]);
        return kinds;
    }
    void expect_repair_restores_service() {
        auto dry = ctl({"repair", "ops"});
        EXPECT_EQ(dry.exit_code, 1) << dry.out;
        auto fix = ctl({"repair", "ops", "--apply"});
        EXPECT_EQ(fix.exit_code, 0) << fix.out << fix.err;
        auto next = run_plugin(cni_env("ADD", "after-repair"), cfg.dump());  // rebuilds if retired
        EXPECT_EQ(next.exit_code, 0) << next.out;
        auto verify = ctl({"verify", "ops"});
        EXPECT_EQ(verify.exit_code, 0) << verify.out;
        // The attachments made before the damage are still there (from the arena or journal).
        auto check = run_plugin(cni_env("ADD", "c3"), cfg.dump());
        EXPECT_EQ(check.exit_code, 0) << check.out;
    }

    TempDir dir;
    json cfg;
};

TEST_F(Ctl, LsStatsAndDumpMatchWhatWasAllocated) {
    const json ls = ctl_json({"ls", "--json"});
    ASSERT_EQ(ls.size(), 1u);
    EXPECT_EQ(ls[0]["network"], "ops");
    EXPECT_EQ(ls[0]["inUse"], 80) << "40 attachments, two addresses each";
    EXPECT_EQ(ls[0]["ranges"],
              "10.91.0.0/23 [10.91.0.1-10.91.1.254] ; fd91::/120 [fd91::1-fd91::ff]");
    EXPECT_EQ(ls[0]["reuseDelayMs"], 0);
    const json stats = ctl_json({"stats", "ops", "--json"});
    EXPECT_EQ(stats["adds"], 40);
    EXPECT_EQ(stats["claims"], 80);
    ASSERT_EQ(stats["ranges"].size(), 2u);
    EXPECT_EQ(stats["ranges"][0]["range"], "10.91.0.1-10.91.1.254");
    EXPECT_EQ(stats["ranges"][0]["inUse"], 40);
    EXPECT_EQ(stats["ranges"][1]["rangeSet"], 1);
    EXPECT_EQ(stats["ranges"][1]["inUse"], 40);
    const json dump = ctl_json({"dump", "ops", "--json"});
    EXPECT_EQ(dump["allocations"].size(), 80u);
    const json one = ctl_json({"dump", "ops", "--json", "--pod", "ns/p5"});
    ASSERT_EQ(one["allocations"].size(), 2u);
    EXPECT_EQ(one["allocations"][0]["containerID"], "c5");
    const json by_addr = ctl_json({"dump", "ops", "--json", "--address", "10.91.0.2"});
    ASSERT_EQ(by_addr["allocations"].size(), 1u);
    EXPECT_EQ(by_addr["allocations"][0]["containerID"], "c0");
    const json by_cid = ctl_json({"dump", "ops", "--json", "--container", "c1"});
    EXPECT_EQ(by_cid["allocations"].size(), 2u * 11) << "c1 and c10..c19";
}

TEST_F(Ctl, DumpSaysHowLongAnAddressStillCools) {
    json slow = cfg;
    slow["ipam"]["reuseDelay"] = 600;
    const auto start = std::chrono::steady_clock::now();
    ASSERT_EQ(run_plugin(cni_env("DEL", "c9"), slow.dump()).exit_code, 0);
    const json d = ctl_json({"dump", "ops", "--json", "--state", "cooling"});
    const std::string text = ctl({"dump", "ops", "--state", "cooling"}).out;
    // However slow the machine, no more than this has passed since the release.
    const auto elapsed_ms = uint64_t(std::chrono::duration_cast<std::chrono::milliseconds>(
                                         std::chrono::steady_clock::now() - start)
                                         .count()) +
                            1;
    ASSERT_EQ(d["allocations"].size(), 2u);
    const auto left = d["allocations"][0]["coolingMsLeft"].get<uint64_t>();
    EXPECT_GE(left + elapsed_ms, 600'000u);
    EXPECT_LE(left, 600'000u);
    std::smatch m;
    ASSERT_TRUE(std::regex_search(text, m, std::regex("cooling for ([0-9]+)s more"))) << text;
    const uint64_t seconds = std::stoull(m[1]);  // rounded up
    EXPECT_GE(seconds * 1000 + elapsed_ms, 600'000u) << text;
    EXPECT_LE(seconds, 600u) << text;
}

TEST_F(Ctl, ReleaseIsADryRunUnlessApplied) {
    auto dry = ctl({"release", "ops", "--pod", "ns/p7"});
    EXPECT_EQ(dry.exit_code, 1);
    EXPECT_EQ(ctl_json({"dump", "ops", "--json", "--pod", "ns/p7"})["allocations"].size(), 2u);
    const json done = ctl_json({"release", "ops", "--pod", "ns/p7", "--apply", "--json"});
    ASSERT_EQ(done["released"].size(), 1u);
    EXPECT_EQ(done["released"][0]["containerID"], "c7");
    EXPECT_EQ(ctl_json({"dump", "ops", "--json", "--pod", "ns/p7"})["allocations"].size(), 0u);
    const json by_addr =
        ctl_json({"release", "ops", "--address", "10.91.0.3", "--apply", "--json"});
    ASSERT_EQ(by_addr["released"].size(), 1u);
    EXPECT_EQ(by_addr["released"][0]["containerID"], "c1");
    const json by_cid =
        ctl_json({"release", "ops", "--container", "c2", "--ifname", "eth0", "--apply", "--json"});
    ASSERT_EQ(by_cid["released"].size(), 1u);
    EXPECT_EQ(ctl({"verify", "ops"}).exit_code, 0);
}

TEST_F(Ctl, GcReleasesEverythingNotListed) {
    write_file(dir.sub("valid.json"),
               R"([{"containerID":"c0","ifname":"eth0"},{"containerID":"c1","ifname":"eth0"}])");
    auto dry = ctl({"gc", "ops", "--valid", dir.sub("valid.json"), "--json"});
    EXPECT_EQ(dry.exit_code, 1) << "a dry run that finds work says so";
    EXPECT_EQ(dry.json()["released"].size(), 38u);
    EXPECT_EQ(ctl_json({"stats", "ops", "--json"})["dels"], 0) << "a dry run changes nothing";
    const json old_only = ctl_json({"gc", "ops", "--valid", dir.sub("valid.json"), "--older-than",
                                    "3600", "--apply", "--json"});
    EXPECT_EQ(old_only["released"].size(), 0u) << "nothing is an hour old";
    const json done =
        ctl_json({"gc", "ops", "--valid", dir.sub("valid.json"), "--apply", "--json"});
    EXPECT_EQ(done["released"].size(), 38u);
    EXPECT_EQ(ctl_json({"dump", "ops", "--json", "--state", "allocated"})["allocations"].size(),
              4u);
}

TEST_F(Ctl, MetricsFollowTheExpositionGrammar) {
    auto r = ctl({"metrics"});
    ASSERT_EQ(r.exit_code, 0);
    const std::regex help(R"(# HELP [a-zA-Z_:][a-zA-Z0-9_:]* .+)");
    const std::regex type(R"(# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge))");
    const std::regex sample(
        R"(([a-zA-Z_:][a-zA-Z0-9_:]*)\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\\n]|\\.)*")(,[a-zA-Z_][a-zA-Z0-9_]*="([^"\\\n]|\\.)*")*\} [0-9]+(\.[0-9]+)?)");
    std::map<std::string, std::string> types;
    std::stringstream ss(r.out);
    std::string line;
    int samples = 0;
    while (std::getline(ss, line)) {
        std::smatch m;
        if (std::regex_match(line, m, type)) {
            types[m[1]] = m[2];
        } else if (std::regex_match(line, help)) {
        } else if (std::regex_match(line, m, sample)) {
            ASSERT_TRUE(types.count(m[1])) << "sample before its TYPE: " << line;
            if (types[m[1]] == "counter") {
                EXPECT_TRUE(std::string(m[1]).size() > 6 &&
                            std::string(m[1]).compare(std::string(m[1]).size() - 6, 6, "_total") ==
                                0)
                    << line;
            }
            ++samples;
        } else {
            ADD_FAILURE() << "not exposition format: " << line;
        }
    }
    EXPECT_GT(samples, 10);
    EXPECT_NE(
        r.out.find(
            "shmipam_addresses{network=\"ops\",block=\"10.91.0.0/24\",state=\"allocated\"} 40"),
        std::string::npos)
        << r.out;
    EXPECT_NE(
        r.out.find("shmipam_range_addresses{network=\"ops\",range_set=\"0\",range=\"10.91.0.1-"
                   "10.91.1.254\",state=\"in_use\"} 40"),
        std::string::npos);
    ASSERT_EQ(ctl({"metrics", "--textfile", dir.path()}).exit_code, 0);
    EXPECT_EQ(read_file(dir.sub("shmipam.prom")), r.out);
}

// A minimal XML well-formedness check: balanced tags, quoted attributes, no stray '<'.
bool well_formed_xml(const std::string& s, std::string* why) {
    std::vector<std::string> stack;
    size_t i = 0;
    while ((i = s.find('<', i)) != std::string::npos) {
        const size_t end = s.find('>', i);
        if (end == std::string::npos) return *why = "unclosed tag", false;
        std::string tag = s.substr(i + 1, end - i - 1);
        i = end + 1;
        if (tag.empty()) return *why = "empty tag", false;
        if (tag[0] == '?' || tag[0] == '!') continue;
        if (std::count(tag.begin(), tag.end(), '"') % 2 != 0)
            return *why = "bad quoting: " + tag, false;
        if (tag[0] == '/') {
            if (stack.empty() || stack.back() != tag.substr(1))
                return *why = "mismatched </" + tag.substr(1) + ">", false;
            stack.pop_back();
            continue;
        }
        const bool self = tag.back() == '/';
        const std::string name = tag.substr(0, tag.find_first_of(" /"));
        if (!self) stack.push_back(name);
    }
    if (!stack.empty()) return *why = "unclosed <" + stack.back() + ">", false;
    return true;
}

// The DaemonSet's metrics container: `metrics --textfile DIR --every N` rewrites the file until
// stopped, so the node exporter serves a count at most N seconds old.
TEST_F(Ctl, MetricsEveryRewritesTheTextfileUntilStopped) {
    Child loop({SHMIPAMCTL_PATH, "--run-dir", dir.sub("run"), "metrics", "--textfile", dir.path(),
                "--every", "0.2"},
               {}, "");
    const std::string allocated40 =
        "shmipam_addresses{network=\"ops\",block=\"10.91.0.0/24\",state=\"allocated\"} 40";
    const std::string allocated41 =
        "shmipam_addresses{network=\"ops\",block=\"10.91.0.0/24\",state=\"allocated\"} 41";
    const auto wait_for = [&](const std::string& text) {
        return wait_until([&] {
            return ::access(dir.sub("shmipam.prom").c_str(), R_OK) == 0 &&
                   read_file(dir.sub("shmipam.prom")).find(text) != std::string::npos;
        });
    };
    EXPECT_TRUE(wait_for(allocated40));
    add("c40", "p40");
    EXPECT_TRUE(wait_for(allocated41)) << read_file(dir.sub("shmipam.prom"));
    ::kill(loop.pid(), SIGTERM);
    const ProcessResult stopped = loop.wait();
    EXPECT_EQ(stopped.exit_code, 0) << "stopped by SIGTERM through its handler (a container's "
                                       "PID 1 ignores a signal it has no handler for)";
    // Without --textfile, --every has nothing to rewrite: refused.
    EXPECT_EQ(ctl({"metrics", "--every", "1"}).exit_code, 2);
}

TEST_F(Ctl, RenderIsWellFormedSvgWithOneCellPerAddress) {
    auto r = ctl({"render", "ops"});
    ASSERT_EQ(r.exit_code, 0);
    std::string why;
    EXPECT_TRUE(well_formed_xml(r.out, &why)) << why;
    EXPECT_NE(r.out.find("<svg"), std::string::npos);
    size_t cells = 0;
    for (size_t p = 0; (p = r.out.find("<rect class=\"cell\"", p)) != std::string::npos; ++p)
        ++cells;
    const json ls = ctl_json({"ls", "--json"});
    EXPECT_EQ(cells, ls[0]["addresses"].get<size_t>());
    EXPECT_NE(r.out.find("10.91.0.2 allocated c0/eth0 pod ns/p0"), std::string::npos);
    // With the configured range, blocks nobody needed yet are drawn too (all free).
    auto full = ctl({"render", "ops", "--cidr", "10.91.0.0/23"});
    ASSERT_EQ(full.exit_code, 0);
    EXPECT_TRUE(well_formed_xml(full.out, &why)) << why;
    size_t second_block = 0;
    for (size_t p = 0; (p = full.out.find("<title>10.91.1.", p)) != std::string::npos; ++p)
        ++second_block;
    EXPECT_EQ(second_block, 256u);
}

TEST_F(Ctl, BadInputIsAClearErrorNotACrash) {
    auto unknown = ctl({"dump", "nosuchnet"});
    EXPECT_EQ(unknown.exit_code, 2);
    EXPECT_NE(unknown.err.find("nosuchnet"), std::string::npos);
    EXPECT_EQ(run_ctl({"--run-dir", "/nonexistent", "ls"}).exit_code, 2);
    EXPECT_EQ(ctl({"dump", "../etc"}).exit_code, 2);
    write_file(dir.sub("run/garbage/index"), "this is not an index");
    auto garbage = ctl({"verify", "garbage"});
    EXPECT_EQ(garbage.exit_code, 2);
    EXPECT_FALSE(garbage.err.empty());
    EXPECT_EQ(ctl({"release", "ops"}).exit_code, 2) << "release needs a selector";
    EXPECT_EQ(ctl({"gc", "ops", "--valid", dir.sub("missing.json")}).exit_code, 2);
    EXPECT_EQ(ctl({"frobnicate"}).exit_code, 2);
}

// ---- verify: one test per kind of corruption, then repair restores service ----------------

pid_t dead_pid() {
    pid_t p = ::fork();
    if (p == 0) ::_exit(0);
    ::waitpid(p, nullptr, 0);
    return p;
}

TEST_F(Ctl, VerifyFindsADeadLease) {
    auto s = open_rw();
    // Plant: lease 3 held by a pid that no longer exists.
    auto* words = reinterpret_cast<uint64_t*>(reinterpret_cast<std::byte*>(&s->index().header()) +
                                              s->index().header().lease_offset);
    words[3] = shm::LeaseTable::make_word(dead_pid(), 9, s->self().pidns_tag, 1);
    EXPECT_EQ(violation_kinds(), std::set<std::string>{"dead-lease"});
    expect_repair_restores_service();
}

struct Planted {
    const char* kind;
    std::function<void(engine::NetworkStore&)> plant;
};

class VerifyCatches : public Ctl, public ::testing::WithParamInterface<Planted> {};

shm::BlockFile& first_block(engine::NetworkStore& s) {
    return *s.all_blocks().value().front();
}

uint64_t committed_entry(engine::NetworkStore& s, int skip = 0) {
    for (uint64_t e = 0; e < s.index().entry_count(); ++e) {
        if (shm::EntryWord::decode(s.index().entry(e).state).state ==
                format::EntryState::kCommitted &&
            skip-- == 0) {
            return e;
        }
    }
    return 0;
}

std::vector<Planted> plants() {
    using format::SlotState;
    return {
        {"stuck-claim",
         [](engine::NetworkStore& s) {
             // .200 claimed by lease 7, which nobody holds.
             auto& b = first_block(s);
             b.slot(200).state = shm::SlotWord{SlotState::kClaiming, 7, 3, 5}.encode();
         }},
        {"stuck-release",
         [](engine::NetworkStore& s) {
             auto& b = first_block(s);
             b.slot(201).state = shm::SlotWord{SlotState::kReleasing, 7, 3, 5}.encode();
         }},
        {"orphan-allocation",
         [](engine::NetworkStore& s) {
             auto& b = first_block(s);
             b.slot(202).state = shm::SlotWord::allocated(0, 12345, 1);
             b.slot(202).owner = shm::SlotOwner::pack(12345, 0, 1);
         }},
        {"dangling-ref",
         [](engine::NetworkStore& s) {
             auto& b = first_block(s);
             b.slot(2).state = shm::SlotWord{SlotState::kFree, 0, 0, 77}.encode();  // c0's IPv4
         }},
        {"owner-mismatch", [](engine::NetworkStore& s) { first_block(s).slot(3).owner ^= 0x1; }},
        {"invalid-slot-state", [](engine::NetworkStore& s) { first_block(s).slot(203).state = 9; }},
        {"stuck-entry",
         [](engine::NetworkStore& s) {
             const uint64_t e = committed_entry(s);
             auto w = shm::EntryWord::decode(s.index().entry(e).state);
             w.state = format::EntryState::kClaiming;
             w.lease_index = 7;
             w.lease_gen = 3;
             s.index().entry(e).state = w.encode();
         }},
        {"bad-fingerprint",
         [](engine::NetworkStore& s) {
             s.index().entry(committed_entry(s)).fp1 ^= uint64_t{1} << 50;
         }},
        {"duplicate-address",
         [](engine::NetworkStore& s) {
             auto& a = s.index().entry(committed_entry(s, 0));
             auto& b = s.index().entry(committed_entry(s, 1));
             b.refs[0] = a.refs[0];
         }},
        {"unjournaled-allocation",
         [](engine::NetworkStore& s) {
             // c0's records never reached the journal (zero every record of c0).
             auto scan = shm::Journal::scan(s.journal().dir());
             for (const auto& r : scan->records) {
                 if (std::string(r.container_id) != "c0") continue;
                 const std::string seg =
                     s.journal().dir() + "/" +
                     shm::Journal::segment_name(r.sequence / format::kJournalRecordsPerSegment);
                 std::string bytes = read_file(seg);
                 const size_t off = (r.sequence % format::kJournalRecordsPerSegment) * sizeof r;
                 std::fill(bytes.begin() + off, bytes.begin() + off + sizeof r, '\0');
                 write_file(seg, bytes);
             }
         }},
        {"missing-ref",
         [](engine::NetworkStore& s) {
             s.index().entry(committed_entry(s)).refs[1] = format::AddressRef{};
         }},
    };
}

TEST_P(VerifyCatches, EachKindOfCorruptionAndRepairRestoresService) {
    {
        auto s = open_rw();
        GetParam().plant(*s);
    }
    const auto kinds = violation_kinds();
    EXPECT_TRUE(kinds.count(GetParam().kind)) << "verify did not report " << GetParam().kind;
    expect_repair_restores_service();
}

TEST_F(Ctl, RepairRejournalsAllocationsSoTheySurviveARebuild) {
    {
        auto s = open_rw();
        for (const auto& p : plants()) {
            if (std::string(p.kind) == "unjournaled-allocation") p.plant(*s);
        }
    }
    EXPECT_TRUE(violation_kinds().count("unjournaled-allocation"));
    ASSERT_EQ(ctl({"repair", "ops", "--apply"}).exit_code, 0);
    EXPECT_EQ(ctl({"verify", "ops"}).exit_code, 0);
    std::filesystem::remove_all(dir.sub("run"));  // lose the arena
    auto again = run_plugin(cni_env("ADD", "c0"), cfg.dump());
    ASSERT_EQ(again.exit_code, 0) << again.out;
    EXPECT_EQ(again.json()["ips"][0]["address"], "10.91.0.2/23") << "c0 kept its address";
}

INSTANTIATE_TEST_SUITE_P(Kinds, VerifyCatches, ::testing::ValuesIn(plants()), [](const auto& info) {
    std::string n = info.param.kind;
    for (char& c : n) {
        if (c == '-') c = '_';
    }
    return n;
});

// ---- dump-file: one state file on its own, as in a bug report -----------------------------

class CtlDumpFile : public Ctl {
  protected:
    std::string index_path() { return dir.sub("run/ops/index"); }
    std::string v4_block_path() {
        for (const auto& e : std::filesystem::directory_iterator(dir.sub("run/ops"))) {
            const std::string n = e.path().filename();
            if (n.rfind("10.91.0.0_24.", 0) == 0) return e.path();
        }
        ADD_FAILURE() << "no block file for 10.91.0.0/24";
        return "";
    }
    // A new network's first segment: every index appends from a segment past its checkpoint's.
    std::string segment_path() { return dir.sub("data/ops/") + shm::Journal::segment_name(1); }
    // A copy of `path` in `sub` (created), so the test can damage it or move it away.
    std::string copy_to(const std::string& path, const std::string& sub) {
        std::filesystem::create_directories(dir.sub(sub));
        const std::string to = dir.sub(sub) + "/" + std::filesystem::path(path).filename().string();
        std::filesystem::copy_file(path, to, std::filesystem::copy_options::overwrite_existing);
        return to;
    }
    ProcessResult dump_file(const std::string& path, bool as_json = false) {
        std::vector<std::string> args{"dump-file", path};
        if (as_json) args.push_back("--json");
        return run_ctl(args);
    }
    json dump_json(const std::string& path) {
        auto r = dump_file(path, true);
        EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
        return r.json();
    }
    static const json* item_of(const json& doc, const std::string& key, const std::string& v) {
        for (const auto& i : doc["items"]) {
            if (i.contains(key) && i[key] == v) return &i;
        }
        return nullptr;
    }
};

TEST_F(CtlDumpFile, IndexListsEveryAttachmentWithItsAddressesAndNeverWritesTheFile) {
    const std::string before = read_file(index_path());
    auto r = dump_file(index_path());
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("kind: index\n"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("network: ops\n"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("adds: 40\n"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("container=c0 ifname=eth0 addresses=10.91.0.2,fd91::2 pod=ns/p0"),
              std::string::npos)
        << r.out;
    const json doc = dump_json(index_path());
    EXPECT_EQ(doc["kind"], "index");
    EXPECT_EQ(doc["summary"]["live_entries"], 40);
    EXPECT_EQ(doc["summary"]["held_leases"], 0);
    const json* c5 = item_of(doc, "container", "c5");
    ASSERT_NE(c5, nullptr);
    EXPECT_EQ((*c5)["state"], "committed");
    EXPECT_EQ((*c5)["pod"], "ns/p5");
    EXPECT_EQ(read_file(index_path()), before) << "dump-file wrote to the file";
}

TEST_F(CtlDumpFile, BlockListsEachAllocatedSlotWithTheEntryThatOwnsIt) {
    const json index = dump_json(index_path());
    const json* c0 = item_of(index, "container", "c0");
    ASSERT_NE(c0, nullptr);
    const json block = dump_json(v4_block_path());
    EXPECT_EQ(block["kind"], "block");
    EXPECT_EQ(block["header"]["block"], "10.91.0.0/24");
    EXPECT_EQ(block["header"]["claims"], 40);
    EXPECT_EQ(block["summary"]["allocated"], 40);
    EXPECT_EQ(block["items"].size(), 40u);
    const json* slot = item_of(block, "address", "10.91.0.2");
    ASSERT_NE(slot, nullptr);
    EXPECT_EQ((*slot)["state"], "allocated");
    EXPECT_EQ((*slot)["owner"],
              "entry " + std::to_string((*c0)["number"].get<uint64_t>()) + " tenancy 1")
        << "the slot names c0's entry in the index";
    auto text = dump_file(v4_block_path());
    EXPECT_EQ(text.exit_code, 0);
    EXPECT_NE(text.out.find("address=10.91.0.41 state=allocated"), std::string::npos) << text.out;
}

TEST_F(CtlDumpFile, JournalSegmentListsEveryRecordAndCountsTheUnusedSlots) {
    const json doc = dump_json(segment_path());
    EXPECT_EQ(doc["kind"], "journal segment");
    EXPECT_EQ(doc["header"]["segment"], 1);
    EXPECT_EQ(doc["summary"]["records"], 80) << "40 ADDs, two addresses each";
    EXPECT_EQ(doc["summary"]["alloc"], 80);
    EXPECT_EQ(doc["summary"]["damaged"], 0);
    EXPECT_EQ(doc["summary"]["unused_slots_skipped"], 4096 - 80);
    const json* rec = item_of(doc, "address", "10.91.0.2");
    ASSERT_NE(rec, nullptr);
    EXPECT_EQ((*rec)["op"], "alloc");
    EXPECT_EQ((*rec)["container"], "c0");
    EXPECT_EQ((*rec)["ifname"], "eth0");
    auto text = dump_file(segment_path());
    EXPECT_EQ(text.exit_code, 0);
    EXPECT_NE(text.out.find("op=alloc address=fd91::2 range_set=1"), std::string::npos) << text.out;
    EXPECT_NE(text.out.find("unused_slots_skipped=4016"), std::string::npos) << text.out;
}

TEST_F(CtlDumpFile, CheckpointWrittenByCompactionListsTheNewestRecordPerAddress) {
    // Reaching compaction through the plugin takes thousands of ADDs; the checkpoint here is
    // written by the same Journal::compact the plugin calls, over a copy of the real journal.
    const std::string scratch =
        std::filesystem::path(copy_to(segment_path(), "compact")).parent_path();
    ASSERT_EQ(run_plugin(cni_env("DEL", "c7"), cfg.dump()).exit_code, 0);
    copy_to(segment_path(), "compact");  // now with c7's releases
    auto scan = shm::Journal::scan(scratch);
    ASSERT_TRUE(scan) << scan.error().msg;
    const uint64_t covered = scan->next_sequence;
    ASSERT_TRUE(shm::Journal::compact(scratch, covered,
                                      shm::Journal::newest_per_address(scan->records), false, 7));
    const std::string name = shm::Journal::checkpoint_name(covered, 7);
    const json doc = dump_json(scratch + "/" + name);
    EXPECT_EQ(doc["kind"], "checkpoint");
    EXPECT_EQ(doc["header"]["covered"], covered);
    EXPECT_EQ(doc["summary"]["records"], 80) << "one record per address";
    EXPECT_EQ(doc["summary"]["release"], 2) << "c7's two addresses, released";
    const json* c7 = item_of(doc, "container", "c7");
    ASSERT_NE(c7, nullptr);
    EXPECT_EQ((*c7)["op"], "release");
}

TEST_F(CtlDumpFile, FlippedByteInAJournalRecordIsShownInlineAndTheOthersStillListed) {
    const std::string copy = copy_to(segment_path(), "damaged");
    std::string bytes = read_file(copy);
    const size_t record = 5, offset = record * sizeof(format::JournalRecord);
    bytes[offset + 100] ^= 0x20;  // inside the container id
    write_file(copy, bytes);
    auto r = dump_file(copy);
    EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
    EXPECT_NE(r.out.find("damaged record at offset " + std::to_string(offset) + " (crc mismatch)"),
              std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("record 4100 at offset"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("record 4102 at offset"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("records=79 "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("damaged=1 "), std::string::npos) << r.out;
    auto j = dump_file(copy, true);
    EXPECT_EQ(j.exit_code, 1);
    EXPECT_EQ(j.json()["damaged"], true);
}

TEST_F(CtlDumpFile, BlockHeaderChecksumMismatchIsSaidAtTheTopAndTheSlotsStillListed) {
    const std::string copy = copy_to(v4_block_path(), "damaged");
    std::string bytes = read_file(copy);
    bytes[offsetof(format::BlockHeader, network)] ^= 0x01;
    write_file(copy, bytes);
    auto r = dump_file(copy);
    EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
    const size_t damage = r.out.find("DAMAGED: header checksum mismatch");
    const size_t first_slot = r.out.find("\nslot ");
    ASSERT_NE(damage, std::string::npos) << r.out;
    ASSERT_NE(first_slot, std::string::npos) << r.out;
    EXPECT_LT(damage, first_slot);
    EXPECT_NE(r.out.find("allocated=40 "), std::string::npos) << r.out;
}

TEST_F(CtlDumpFile, TruncatedEmptyOrForeignFileExitsTwoSayingWhatIsWrong) {
    auto expect_refused = [&](const std::string& path, const std::string& says) {
        auto r = dump_file(path);
        EXPECT_EQ(r.exit_code, 2) << path << ": " << r.out;
        EXPECT_NE(r.err.find(says), std::string::npos) << path << ": " << r.err;
    };
    std::filesystem::create_directories(dir.sub("bad"));
    write_file(dir.sub("bad/index"), "");
    expect_refused(dir.sub("bad/index"), "empty");
    std::string noise(8192, '\0');
    for (size_t i = 0; i < noise.size(); ++i) noise[i] = char((i * 2654435761u) >> 13);
    write_file(dir.sub("bad/index"), noise);
    expect_refused(dir.sub("bad/index"), "magic");
    write_file(dir.sub("bad/random.bin"), noise);
    expect_refused(dir.sub("bad/random.bin"), "cannot tell what");
    write_file(dir.sub("bad/index"), read_file(index_path()).substr(0, 10000));
    expect_refused(dir.sub("bad/index"), "truncated");
    const std::string seg = dir.sub("bad/") + shm::Journal::segment_name(0);
    write_file(seg, read_file(segment_path()).substr(0, 4096));
    expect_refused(seg, "truncated");
    write_file(seg, std::string(format::kJournalSegmentBytes, '\x5a'));
    expect_refused(seg, "not a journal segment");
    expect_refused(dir.sub("bad/missing"), "cannot read");
}

TEST_F(CtlDumpFile, CopyInAnUnrelatedDirectoryDumpsTheSameWithoutTheRunDirectory) {
    const std::vector<std::string> originals{index_path(), v4_block_path(), segment_path()};
    std::vector<std::string> before;
    for (const auto& p : originals) before.push_back(dump_file(p).out);
    std::vector<std::string> copies;
    for (const auto& p : originals) copies.push_back(copy_to(p, "bug-report"));
    std::filesystem::remove_all(dir.sub("run"));  // no network, no config: just the files
    std::filesystem::remove_all(dir.sub("data"));
    for (size_t i = 0; i < copies.size(); ++i) {
        auto r = dump_file(copies[i]);
        EXPECT_EQ(r.exit_code, 0) << copies[i] << r.err;
        // Everything but the first line (the path) is the same.
        EXPECT_EQ(r.out.substr(r.out.find('\n')), before[i].substr(before[i].find('\n')))
            << copies[i];
    }
}

// ---- release racing with concurrent ADDs never frees a re-claimed address ------------------

TEST_F(Ctl, ReleaseByAddressNeverFreesAReclaimedAddress) {
    json one = cfg;
    one["ipam"]["ranges"] = json::parse(R"([[{"subnet":"10.92.0.0/24"}]])");
    one["name"] = "race";
    const std::string conf = one.dump();
    for (int round = 0; round < 25; ++round) {
        const std::string x = "x" + std::to_string(round), y = "y" + std::to_string(round);
        ASSERT_EQ(run_plugin(cni_env("ADD", x, "eth0", "IP=10.92.0.50"), conf).exit_code, 0);
        // The operator releases "whoever holds .50" while the runtime DELs x and y takes .50.
        Child release({SHMIPAMCTL_PATH, "--run-dir", dir.sub("run"), "release", "race", "--address",
                       "10.92.0.50", "--apply", "--json"},
                      {}, "");
        ASSERT_EQ(run_plugin(cni_env("DEL", x), conf).exit_code, 0);
        auto ya = run_plugin(cni_env("ADD", y, "eth0", "IP=10.92.0.50"), conf);
        auto rel = release.wait();
        ASSERT_EQ(rel.exit_code, 0) << rel.out << rel.err;
        std::set<std::string> released;
        const json doc = rel.json();
        for (const auto& r : doc["released"]) released.insert(r["containerID"]);
        auto check = run_plugin(cni_env("CHECK", y), [&] {
            json c = one;
            return c.dump();
        }());
        if (ya.exit_code == 0 && !released.count(y)) {
            // y got .50 and the tool did not release y: y must still hold it.
            EXPECT_EQ(check.exit_code, 0) << "round " << round << ": y lost .50: " << check.out;
        }
        ASSERT_EQ(run_plugin(cni_env("DEL", y), conf).exit_code, 0);
        ASSERT_EQ(run_ctl({"--run-dir", dir.sub("run"), "verify", "race"}).exit_code, 0);
    }
}

}  // namespace
}  // namespace shmipam::testing

namespace shmipam::testing {
namespace {

// Before one config reader (ipam/config.h), shmipamctl's verbs read the ipam section each its
// own lenient way: a field of the wrong type was taken as its default while the plugin refused
// the same config. `cluster pass` went on to the store with blockMinAgeS "300" read as 300 s, and
// `explain` chose pools with clean_gateway "yes" read as false.
TEST(CtlConfig, VerbsRefuseAFieldOfTheWrongTypeAsThePluginDoesNamingIt) {
    TempDir dir;
    const json config = {{"cniVersion", "1.1.0"},
                         {"name", "pods"},
                         {"type", "bridge"},
                         {"ipam",
                          {{"type", "shmipam"},
                           {"poolsDir", dir.sub("pools")},
                           {"dataDir", dir.sub("data")},
                           {"runDir", dir.sub("run")},
                           {"nodeName", "node-a"},
                           {"etcd", {{"endpoints", {"http://127.0.0.1:9"}}, {"budgetMs", 200}}}}}};
    const auto refused = [&](const char* field, const json& value, std::vector<std::string> args) {
        json c = config;
        c["ipam"][field] = value;
        write_file(dir.sub("pods.conf"), c.dump());
        args.insert(args.end(), {"--config", dir.sub("pods.conf")});
        auto r = run_ctl(args);
        EXPECT_EQ(r.exit_code, 2) << field << ": " << r.out << r.err;
        EXPECT_NE(r.err.find(std::string("ipam.") + field), std::string::npos)
            << field << ": " << r.err;
        auto plugin = run_plugin(cni_env("ADD", "c1"), c.dump());
        EXPECT_EQ(plugin.exit_code, 1) << "the plugin refuses it too";
        EXPECT_NE(plugin.out.find(field), std::string::npos) << plugin.out;
    };
    refused("blockMinAgeS", "300", {"cluster", "pass"});
    refused("fixedAddressPools", "sts", {"cluster", "ls"});
    refused("clean_gateway", "yes", {"explain", "--pod", "web-0"});
}

}  // namespace
}  // namespace shmipam::testing
