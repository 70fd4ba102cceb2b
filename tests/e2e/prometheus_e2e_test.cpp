// shmipam's metrics as an operator collects them: `shmipamctl metrics --textfile` writes into
// Debian's real prometheus-node-exporter's textfile collector, Debian's real Prometheus scrapes
// the exporter on loopback, and Prometheus's HTTP API (through promtool) answers the in-use
// count of the network the test filled.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include "tests/e2e/e2e_support.h"
#include "tests/support/kube_standin.h"
#include "tests/support/plugin_runner.h"
#include "tests/support/recheck_due.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_ports.h"
#include "tests/support/wait_for.h"

namespace shmipam::testing {
namespace {

using nlohmann::json;

constexpr const char* kExporter = "/usr/bin/prometheus-node-exporter";
constexpr const char* kPrometheus = "/usr/bin/prometheus";
constexpr const char* kPromtool = "/usr/bin/promtool";
// How long the exporter or Prometheus may take to listen: their start-up (Prometheus opens its
// storage first) on a loaded machine.
constexpr int kListenTimeoutMs = 60'000;

class PrometheusE2E : public ::testing::Test {
  protected:
    void SetUp() override {
        for (const char* need : {kExporter, kPrometheus, kPromtool}) SHMIPAM_REQUIRE_TOOL(need);
        std::filesystem::create_directories(dir.sub("textfile"));
    }
    void TearDown() override {
        for (auto* c : {&prometheus, &exporter}) {
            if (*c) {
                ::kill((*c)->pid(), SIGTERM);
                (*c)->wait();
            }
        }
    }
    // `argv_at(address)` started on a reserved loopback port until it listens there (again on
    // another port when it exits first: kPortAttempts in all); its address, empty if it never
    // listened (the test has failed then).
    std::string start_listening(
        std::unique_ptr<Child>& child,
        const std::function<std::vector<std::string>(const std::string&)>& argv_at) {
        for (int attempt = 1; attempt <= kPortAttempts; ++attempt) {
            std::string why;
            const uint16_t port = reserve_port(&why);
            if (port == 0) {
                ADD_FAILURE() << why;
                return "";
            }
            const std::string at = "127.0.0.1:" + std::to_string(port);
            child = std::make_unique<Child>(argv_at(at), std::map<std::string, std::string>{}, "");
            const Listening up = wait_listening(port, child->pid(), kListenTimeoutMs);
            if (up == Listening::kYes) return at;
            if (up == Listening::kTimedOut) ::kill(child->pid(), SIGKILL);
            const ProcessResult gone = child->wait();
            child.reset();
            if (up == Listening::kTimedOut || attempt == kPortAttempts) {
                ADD_FAILURE() << argv_at(at)[0] << " did not listen on " << at << ": " << gone.err;
                return "";
            }
        }
        return "";
    }
    // The node exporter with only its textfile collector, and Prometheus scraping it each
    // second (with `rules` as its rule file, when given); Prometheus's address.
    std::string start_scraping(const std::string& rules = "") {
        const std::string exporter_at = start_listening(exporter, [&](const std::string& at) {
            return std::vector<std::string>{kExporter, "--collector.disable-defaults",
                                            "--collector.textfile",
                                            "--collector.textfile.directory=" + dir.sub("textfile"),
                                            "--web.listen-address=" + at};
        });
        std::ofstream(dir.sub("prometheus.yml"))
            << "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
               "scrape_configs:\n  - job_name: node\n    static_configs:\n      - targets: ['"
            << exporter_at << "']\n"
            << (rules.empty() ? std::string() : "rule_files: ['" + rules + "']\n");
        const std::string prometheus_at = start_listening(prometheus, [&](const std::string& at) {
            return std::vector<std::string>{
                kPrometheus, "--config.file=" + dir.sub("prometheus.yml"),
                "--storage.tsdb.path=" + dir.sub("tsdb"), "--web.listen-address=" + at};
        });
        return "http://" + prometheus_at;
    }
    // The value of `expr` as Prometheus answers it, polled until it has one (up to 60 s).
    std::optional<double> query(const std::string& server, const std::string& expr) {
        for (int i = 0; i < 120; ++i) {
            auto r =
                run_process({kPromtool, "query", "instant", "-o", "json", server, expr}, {}, "");
            const json j = r.json();
            if (r.exit_code == 0 && j.is_array() && !j.empty()) {
                return std::stod(j[0]["value"][1].get<std::string>());
            }
            ::usleep(500 * 1000);
        }
        return std::nullopt;
    }
    TempDir dir;
    std::unique_ptr<Child> exporter, prometheus;
};

TEST_F(PrometheusE2E, PrometheusScrapesTheInUseCountOfANetworkTheTestFilled) {
    const std::string cfg = make_config(dir.path(), "metricsnet", "1.0.0", "10.125.0.0/24").dump();
    for (int i = 0; i < 20; ++i) {
        auto r = run_plugin(cni_env("ADD", "c" + std::to_string(i)), cfg);
        ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    }
    for (int i = 0; i < 3; ++i) {
        auto r = run_plugin(cni_env("DEL", "c" + std::to_string(i)), cfg);
        ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    }
    auto m = run_ctl({"--run-dir", dir.sub("run"), "metrics", "--textfile", dir.sub("textfile")});
    ASSERT_EQ(m.exit_code, 0) << m.out << m.err;
    const std::string server = start_scraping();
    auto in_use =
        query(server, "sum(shmipam_addresses{network=\"metricsnet\",state=\"allocated\"})");
    ASSERT_TRUE(in_use) << "Prometheus never answered; the exporter serves:\n"
                        << run_process({"/bin/cat", dir.sub("textfile/shmipam.prom")}, {}, "").out;
    EXPECT_EQ(*in_use, 17.0);
    auto adds = query(server, "shmipam_adds_total{network=\"metricsnet\"}");
    ASSERT_TRUE(adds);
    EXPECT_EQ(*adds, 20.0);
    // The textfile rewritten after more ADDs: the next scrape has the new count.
    for (int i = 20; i < 25; ++i) {
        auto r = run_plugin(cni_env("ADD", "c" + std::to_string(i)), cfg);
        ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    }
    m = run_ctl({"--run-dir", dir.sub("run"), "metrics", "--textfile", dir.sub("textfile")});
    ASSERT_EQ(m.exit_code, 0) << m.out << m.err;
    auto later =
        query(server, "sum(shmipam_addresses{network=\"metricsnet\",state=\"allocated\"}) == 22");
    ASSERT_TRUE(later) << "the new count never reached Prometheus";
    EXPECT_EQ(*later, 22.0);
}

// The StatefulSet recheck's record as an operator sees it: a node whose role cannot read
// statefulsets (the API stand-in answers 403 for them) keeps a StatefulSet pod's idle claim;
// the metrics reach Prometheus, and with the sample rules (deploy/prometheus) loaded the alert
// for claims kept on error goes pending (it fires after its hour).
TEST_F(PrometheusE2E, PrometheusScrapesARefusedRecheckAndTheSampleAlertGoesPending) {
    constexpr const char* kRules = SHMIPAM_SOURCE_DIR "/deploy/prometheus/shmipam-rules.yaml";
    auto checked = run_process({kPromtool, "check", "rules", kRules}, {}, "");
    ASSERT_EQ(checked.exit_code, 0) << checked.out << checked.err;
    KubeStandin api;
    ASSERT_TRUE(api.ready()) << api.why_not_ready();
    std::filesystem::create_directories(dir.sub("pools"));
    write_file(dir.sub("pools/pools.yaml"),
               "apiVersion: spiderpool.spidernet.io/v2beta1\nkind: SpiderIPPool\n"
               "metadata: {name: general}\nspec: {subnet: 10.126.0.0/24, ips: "
               "[\"10.126.0.10-10.126.0.200\"], default: true}\n");
    const json cfg = {{"cniVersion", "1.1.0"},
                      {"name", "net"},
                      {"type", "bridge"},
                      {"ipam",
                       {{"type", "shmipam"},
                        {"runDir", dir.sub("run")},
                        {"dataDir", dir.sub("data")},
                        {"poolsDir", dir.sub("pools")},
                        {"nodeName", "node-a"},
                        // Walks where the test makes them due (support/recheck_due.h).
                        {"statefulSetRecheckS", kRecheckPeriodLongerThanATest},
                        {"kubernetes",
                         {{"kubeconfig", api.kubeconfig()},
                          {"budgetMs", 10'000},
                          {"connectTimeoutMs", 10'000}}}}}};
    const auto call = [&](const std::string& cmd, const std::string& pod, const std::string& uid) {
        return run_plugin(cni_env(cmd, "c-" + pod, "eth0",
                                  "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=" + pod +
                                      ";K8S_POD_UID=" + uid),
                          cfg.dump());
    };
    api.put_statefulset("default", "db", 1, std::nullopt);
    api.put_pod("default", "db-0", "uid-0", {}, {},
                {kube::protocol::OwnerReference{"apps/v1", "StatefulSet", "db", "uid-db", true}});
    ASSERT_EQ(call("ADD", "db-0", "uid-0").exit_code, 0);
    // The node's first walk, after that answer, has run (and left the marker).
    ASSERT_TRUE(
        wait_until([&] { return std::filesystem::exists(dir.sub("run/owner-recheck.json")); }));
    api.force_status(403, "/apis/apps/v1/");
    ASSERT_EQ(call("DEL", "db-0", "uid-0").exit_code, 0);
    // The walk after a later answer is refused too, and keeps it.
    ASSERT_TRUE(make_recheck_due(dir.sub("run")));
    ASSERT_EQ(call("ADD", "web-5d4f7-x2x7z", "uid-1").exit_code, 0);
    const auto kept = [&] {
        auto m = run_ctl({"--run-dir", dir.sub("run"), "metrics"});
        return m.out.find("shmipam_owner_recheck_claims_kept_on_error 1") != std::string::npos;
    };
    ASSERT_TRUE(wait_until(kept)) << read_file(dir.sub("run/owner-recheck.json"));
    auto m = run_ctl({"--run-dir", dir.sub("run"), "metrics", "--textfile", dir.sub("textfile")});
    ASSERT_EQ(m.exit_code, 0) << m.out << m.err;
    const std::string server = start_scraping(kRules);
    auto errors = query(server, "shmipam_owner_recheck_errors_total");
    ASSERT_TRUE(errors) << "Prometheus never answered";
    EXPECT_EQ(*errors, 2.0) << "the DEL's check and the walk";
    auto pending = query(server,
                         "ALERTS{alertname=\"ShmipamStatefulSetClaimsKeptOnError\","
                         "alertstate=\"pending\"}");
    ASSERT_TRUE(pending) << "the sample alert never went pending";
    EXPECT_EQ(*pending, 1.0);
}

}  // namespace
}  // namespace shmipam::testing
