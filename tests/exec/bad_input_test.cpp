// Bad input of every kind gets the right CNI error code and leaves the network's state exactly
// as it was (compared through shmipamctl's dump: addresses, states and owners) and verifiable.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <functional>

#include "shm/crc32c.h"
#include "shm/format.h"
#include "shm/layout_fingerprint.h"
#include "tests/support/plugin_runner.h"
#include "tests/support/temp_dir.h"

namespace shmipam::testing {
namespace {

using nlohmann::json;

struct BadCase {
    std::string name;
    int code;
    std::function<void(std::map<std::string, std::string>& env, std::string& stdin_text)> mutate;
};

void PrintTo(const BadCase& c, std::ostream* os) {
    *os << c.name;
}

json allocation_state(const std::string& run_dir) {
    auto d = run_ctl({"--run-dir", run_dir, "dump", "net", "--json"});
    json out = json::array();
    const json doc = d.json();  // keep it alive: the loop refers into it
    for (const auto& a : doc["allocations"]) {
        out.push_back(
            {a["address"], a["state"], a.value("containerID", ""), a.value("ifname", "")});
    }
    return out;
}

std::string with(const json& base, const std::function<void(json&)>& f) {
    json j = base;
    f(j);
    return j.dump();
}

class BadInput : public ::testing::TestWithParam<BadCase> {};

TEST_P(BadInput, GetsTheRightCodeAndChangesNothing) {
    TempDir dir;
    const json cfg = make_config(dir.path(), "net", "1.0.0");
    // An allocation exists before the bad request.
    auto first = run_plugin(cni_env("ADD", "existing"), cfg.dump());
    ASSERT_EQ(first.exit_code, 0) << first.out;
    const json before = allocation_state(dir.sub("run"));
    ASSERT_EQ(before.size(), 1u) << "the comparison must see the existing allocation";

    auto env = cni_env("ADD", "newcomer");
    std::string input = cfg.dump();
    GetParam().mutate(env, input);
    auto r = run_plugin(env, input);
    EXPECT_NE(r.exit_code, 0) << r.out;
    json err = r.json();
    ASSERT_TRUE(err.is_object()) << "stdout must be CNI error JSON, got: " << r.out;
    EXPECT_EQ(err["code"], GetParam().code) << r.out;
    EXPECT_TRUE(err["msg"].is_string() && !err["msg"].get<std::string>().empty());
    EXPECT_TRUE(err.contains("cniVersion"));

    EXPECT_EQ(allocation_state(dir.sub("run")), before);
    auto verify = run_ctl({"--run-dir", dir.sub("run"), "verify", "net"});
    EXPECT_EQ(verify.exit_code, 0) << verify.out;
}

const json kBase = make_config("/tmp/unused", "net", "1.0.0");

std::vector<BadCase> cases() {
    using Env = std::map<std::string, std::string>;
    auto cfg_edit = [](std::function<void(json&)> f) {
        return [f](Env&, std::string& in) {
            json j = json::parse(in);
            f(j);
            in = j.dump();
        };
    };
    return {
        {"malformed_json", 6, [](Env&, std::string& in) { in = "{\"cniVersion\": "; }},
        {"not_an_object", 6, [](Env&, std::string& in) { in = "[1,2]"; }},
        {"empty_stdin", 6, [](Env&, std::string& in) { in = ""; }},
        {"missing_command", 4, [](Env& e, std::string&) { e.erase("CNI_COMMAND"); }},
        {"unknown_command", 4, [](Env& e, std::string&) { e["CNI_COMMAND"] = "FROB"; }},
        {"missing_containerid", 4, [](Env& e, std::string&) { e.erase("CNI_CONTAINERID"); }},
        {"missing_ifname", 4, [](Env& e, std::string&) { e.erase("CNI_IFNAME"); }},
        {"missing_netns", 4, [](Env& e, std::string&) { e.erase("CNI_NETNS"); }},
        {"bad_containerid", 4, [](Env& e, std::string&) { e["CNI_CONTAINERID"] = "../evil"; }},
        {"ifname_too_long", 4, [](Env& e, std::string&) { e["CNI_IFNAME"] = "abcdefghijklmnop"; }},
        {"ifname_slash", 4, [](Env& e, std::string&) { e["CNI_IFNAME"] = "a/b"; }},
        {"unknown_cni_args", 4, [](Env& e, std::string&) { e["CNI_ARGS"] = "FOO=bar"; }},
        {"subnet_wrong_type", 6,
         cfg_edit([](json& j) { j["ipam"]["ranges"][0][0]["subnet"] = 5; })},
        {"ranges_wrong_type", 6, cfg_edit([](json& j) {
             j["ipam"]["ranges"] = {{"a", "b"}};
         })},
        {"bad_cidr", 7,
         cfg_edit([](json& j) { j["ipam"]["ranges"][0][0]["subnet"] = "10.10.0.0/33"; })},
        {"host_bits", 7,
         cfg_edit([](json& j) { j["ipam"]["ranges"][0][0]["subnet"] = "10.10.0.1/24"; })},
        {"too_small", 7,
         cfg_edit([](json& j) { j["ipam"]["ranges"][0][0]["subnet"] = "10.10.0.0/31"; })},
        {"mixed_families", 7, cfg_edit([](json& j) {
             j["ipam"]["ranges"][0].push_back({{"subnet", "fd00::/64"}});
         })},
        {"overlapping_sets", 7, cfg_edit([](json& j) {
             j["ipam"]["ranges"].push_back({{{"subnet", "10.10.0.0/25"}}});
         })},
        {"no_ranges", 7, cfg_edit([](json& j) { j["ipam"].erase("ranges"); })},
        {"no_ipam", 7, cfg_edit([](json& j) { j.erase("ipam"); })},
        {"unknown_version", 1, cfg_edit([](json& j) { j["cniVersion"] = "9.9.9"; })},
        {"old_version", 1, cfg_edit([](json& j) { j["cniVersion"] = "0.2.0"; })},
        {"hostile_name_dotdot", 7, cfg_edit([](json& j) { j["name"] = ".."; })},
        {"hostile_name_path", 7, cfg_edit([](json& j) { j["name"] = "../../etc"; })},
        {"hostile_name_slash", 7, cfg_edit([](json& j) { j["name"] = "a/b"; })},
        {"requested_outside", 102, [](Env& e, std::string&) { e["CNI_ARGS"] = "IP=10.99.0.1"; }},
        {"requested_gateway", 102, [](Env& e, std::string&) { e["CNI_ARGS"] = "IP=10.10.0.1"; }},
        {"requested_taken", 101, [](Env& e, std::string&) { e["CNI_ARGS"] = "IP=10.10.0.2"; }},
        {"requested_garbage", 7, [](Env& e, std::string&) { e["CNI_ARGS"] = "IP=ten.ten"; }},
        {"other_data_dir", 103, cfg_edit([](json& j) { j["ipam"]["dataDir"] = "/elsewhere"; })},
        {"changed_block_size", 7, cfg_edit([](json& j) { j["ipam"]["blockSize"] = 26; })},
        {"journal_max_segments_zero", 7,
         cfg_edit([](json& j) { j["ipam"]["journalMaxSegments"] = 0; })},
        {"journal_max_segments_negative", 7,
         cfg_edit([](json& j) { j["ipam"]["journalMaxSegments"] = -3; })},
        {"journal_max_segments_string", 7,
         cfg_edit([](json& j) { j["ipam"]["journalMaxSegments"] = "8"; })},
        {"journal_max_segments_fraction", 7,
         cfg_edit([](json& j) { j["ipam"]["journalMaxSegments"] = 2.5; })},
        {"check_below_040", 1,
         [](Env& e, std::string& in) {
             e["CNI_COMMAND"] = "CHECK";
             json j = json::parse(in);
             j["cniVersion"] = "0.3.1";
             in = j.dump();
         }},
        {"missing_resolv_conf", 7,
         cfg_edit([](json& j) { j["ipam"]["resolvConf"] = "/nonexistent/resolv.conf"; })},
        // A boot id that cannot be read is an error, never zeros: zeros would make the live
        // state look like another boot's, to be retired and reclaimed.
        {"boot_id_file_missing", 5,
         cfg_edit([](json& j) { j["ipam"]["bootIdFile"] = "/nonexistent/boot_id"; })},
        {"boot_id_file_not_a_boot_id", 5,
         cfg_edit([](json& j) { j["ipam"]["bootIdFile"] = "/proc/version"; })},
    };
}

INSTANTIATE_TEST_SUITE_P(Matrix, BadInput, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return info.param.name; });

TEST(BadInputIo, UnwritableRunDirIsAnIoError) {
    TempDir dir;
    write_file(dir.sub("file"), "not a directory");
    json cfg = make_config(dir.path(), "net", "1.0.0");
    cfg["ipam"]["runDir"] = dir.sub("file") + "/run";
    auto r = run_plugin(cni_env("ADD", "c"), cfg.dump());
    EXPECT_EQ(r.json()["code"], 5) << r.out;
}

TEST(BadInputIo, CorruptAndForeignStateFilesAreClearErrors) {
    struct Damage {
        const char* name;
        int code;
        std::function<void(const std::string& index_path)> apply;
    };
    std::vector<Damage> damages{
        {"zero_length", 105, [](const std::string& p) { write_file(p, ""); }},
        {"truncated", 105,
         [](const std::string& p) { write_file(p, read_file(p).substr(0, 1000)); }},
        {"foreign", 103, [](const std::string& p) { write_file(p, std::string(8192, 'x')); }},
        {"bad_checksum", 105,
         [](const std::string& p) {
             std::string s = read_file(p);
             s[100] ^= 0x55;
             write_file(p, s);
         }},
        {"wrong_version", 104,
         [](const std::string& p) {
             std::string s = read_file(p);
             s[8] = 99;
             write_file(p, s);
         }},
        // Written by a build whose structs differ under the same version (a struct edited
        // without a version bump): the header is otherwise intact, its checksum right.
        {"other_layout", 104,
         [](const std::string& p) {
             using format::IndexHeader;
             std::string s = read_file(p);
             const uint32_t other = format::kLayoutFingerprint ^ 0x10;
             std::memcpy(&s[offsetof(IndexHeader, layout)], &other, 4);
             const uint32_t crc = shm::crc32c(s.data(), offsetof(IndexHeader, header_crc));
             std::memcpy(&s[offsetof(IndexHeader, header_crc)], &crc, 4);
             write_file(p, s);
         }},
    };
    for (const auto& d : damages) {
        TempDir dir;
        json cfg = make_config(dir.path(), "net", "1.0.0");
        ASSERT_EQ(run_plugin(cni_env("ADD", "a"), cfg.dump()).exit_code, 0);
        d.apply(dir.sub("run/net/index"));
        auto r = run_plugin(cni_env("ADD", "b"), cfg.dump());
        EXPECT_NE(r.exit_code, 0) << d.name;
        EXPECT_EQ(r.json()["code"], d.code) << d.name << ": " << r.out;
        EXPECT_EQ(r.signal, 0) << d.name << " crashed the plugin";
        if (std::string(d.name) == "other_layout") {
            EXPECT_NE(r.out.find("another layout"), std::string::npos) << r.out;
        }
        auto verify = run_ctl({"--run-dir", dir.sub("run"), "verify", "net"});
        EXPECT_EQ(verify.exit_code, 2) << d.name << ": verify cannot read a damaged index";
        // repair: a dry run says what it would do and changes nothing; --apply restores service,
        // with a's allocation rebuilt from the journal.
        EXPECT_EQ(run_ctl({"--run-dir", dir.sub("run"), "repair", "net"}).exit_code, 1);
        EXPECT_NE(run_plugin(cni_env("ADD", "b"), cfg.dump()).exit_code, 0) << d.name;
        auto fixed = run_ctl({"--run-dir", dir.sub("run"), "repair", "net", "--apply"});
        EXPECT_EQ(fixed.exit_code, 0) << d.name << ": " << fixed.out << fixed.err;
        auto b = run_plugin(cni_env("ADD", "b"), cfg.dump());
        EXPECT_EQ(b.exit_code, 0) << d.name << ": " << b.out;
        auto a = run_plugin(cni_env("ADD", "a"), cfg.dump());
        EXPECT_EQ(a.json()["ips"][0]["address"], "10.10.0.2/24") << d.name << ": " << a.out;
        EXPECT_EQ(run_ctl({"--run-dir", dir.sub("run"), "verify", "net"}).exit_code, 0) << d.name;
    }
}

TEST(BadInputIo, ADamagedBlockRetiresTheStateWhichIsRebuiltFromTheJournal) {
    TempDir dir;
    json cfg = make_config(dir.path(), "net", "1.0.0");
    ASSERT_EQ(run_plugin(cni_env("ADD", "a"), cfg.dump()).exit_code, 0);  // 10.10.0.2
    std::string block;
    for (const auto& f : std::filesystem::directory_iterator(dir.sub("run/net"))) {
        if (f.path().extension() == ".blk") block = f.path();
    }
    ASSERT_FALSE(block.empty());
    std::string bytes = read_file(block);
    bytes[40] ^= 0x01;  // inside the checksummed header
    write_file(block, bytes);
    auto first = run_plugin(cni_env("ADD", "b"), cfg.dump());
    EXPECT_EQ(first.json()["code"], 11) << first.out;
    EXPECT_EQ(first.signal, 0);
    auto retry = run_plugin(cni_env("ADD", "b"), cfg.dump());
    ASSERT_EQ(retry.exit_code, 0) << retry.out;
    EXPECT_EQ(retry.json()["ips"][0]["address"], "10.10.0.3/24");
    auto a = run_plugin(cni_env("ADD", "a"), cfg.dump());
    EXPECT_EQ(a.json()["ips"][0]["address"], "10.10.0.2/24") << "rebuilt from the journal";
    EXPECT_EQ(run_ctl({"--run-dir", dir.sub("run"), "verify", "net"}).exit_code, 0);
}

}  // namespace
}  // namespace shmipam::testing
