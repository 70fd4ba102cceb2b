#include "tests/support/kube_standin.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

extern char** environ;

namespace shmipam::testing {

namespace {

using nlohmann::json;

constexpr const char* kPython = "/usr/bin/python3";  // Debian's (docs/testing.md)
// Python's start-up and the import of ssl and http.server: well under a second here; the bound
// is for a loaded CI machine.
constexpr int kStartTimeoutMs = 15'000;

// Runs a command, its output into `log`; true when it exits 0.
bool run(std::vector<std::string> args, const std::string& log) {
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_addopen(&fa, 2, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    pid_t pid = -1;
    const int rc = posix_spawnp(&pid, argv[0], &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) return false;
    int status = 0;
    ::waitpid(pid, &status, 0);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// By a rename: the stand-in never reads half of a file.
void write_atomically(const std::string& path, const std::string& content) {
    const std::string tmp = path + ".tmp";
    write_file(tmp, content);
    std::filesystem::rename(tmp, path);
}

std::string base64(const std::string& bytes) {
    static constexpr char kAlphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string out;
    for (size_t i = 0; i < bytes.size(); i += 3) {
        uint32_t v = uint32_t(uint8_t(bytes[i])) << 16;
        if (i + 1 < bytes.size()) v |= uint32_t(uint8_t(bytes[i + 1])) << 8;
        if (i + 2 < bytes.size()) v |= uint8_t(bytes[i + 2]);
        out += kAlphabet[(v >> 18) & 63];
        out += kAlphabet[(v >> 12) & 63];
        out += i + 1 < bytes.size() ? kAlphabet[(v >> 6) & 63] : '=';
        out += i + 2 < bytes.size() ? kAlphabet[v & 63] : '=';
    }
    return out;
}

std::string object_path(const std::string& api_version, const std::string& plural,
                        const std::string& ns, const std::string& name) {
    const bool core = api_version.find('/') == std::string::npos;
    return (core ? "/api/" : "/apis/") + api_version + "/namespaces/" + ns + "/" + plural + "/" +
           name;
}

// What the API server adds to every object it keeps.
json metadata(const std::string& ns, const std::string& name, const std::string& uid) {
    static int version = 1000;
    return {{"name", name},
            {"namespace", ns},
            {"uid", uid},
            {"resourceVersion", std::to_string(++version)},
            {"creationTimestamp", "2026-01-01T00:00:00Z"}};
}

}  // namespace

KubeStandin::KubeStandin() {
    std::filesystem::create_directories(root());
    if (!make_certificates()) {
        why_ = "cannot make the test certificates: " + read_file(dir_.sub("openssl.log"));
        return;
    }
    token_ = "token-" + std::to_string(::getpid()) + "-0";
    set_token(token_);
    write_file(token_file(), token_ + "\n");
    if (!start()) return;
    write_kubeconfig("kubeconfig");
    ready_ = true;
}

KubeStandin::~KubeStandin() {
    stop();
}

std::string KubeStandin::server() const {
    return "https://127.0.0.1:" + std::to_string(port_);
}

bool KubeStandin::make_certificates() {
    const std::string log = dir_.sub("openssl.log");
    const std::vector<std::string> ec = {"-newkey", "ec", "-pkeyopt",
                                         "ec_paramgen_curve:prime256v1", "-nodes"};
    auto with_ec = [&](std::vector<std::string> head, std::vector<std::string> tail) {
        head.insert(head.end(), ec.begin(), ec.end());
        head.insert(head.end(), tail.begin(), tail.end());
        return head;
    };
    auto self_signed = [&](const std::string& name) {
        return run(with_ec({"openssl", "req", "-x509"},
                           {"-keyout", dir_.sub(name + ".key"), "-out", dir_.sub(name + ".crt"),
                            "-days", "2", "-subj", "/CN=shmipam test " + name}),
                   log);
    };
    auto signed_by_ca = [&](const std::string& name, const std::string& cn,
                            const std::string& ext) {
        write_file(dir_.sub(name + ".ext"), ext);
        return run(with_ec({"openssl", "req", "-new"},
                           {"-keyout", dir_.sub(name + ".key"), "-out", dir_.sub(name + ".csr"),
                            "-subj", "/CN=" + cn}),
                   log) &&
               run({"openssl", "x509", "-req", "-in", dir_.sub(name + ".csr"), "-CA",
                    dir_.sub("ca.crt"), "-CAkey", dir_.sub("ca.key"), "-CAcreateserial", "-out",
                    dir_.sub(name + ".crt"), "-days", "2", "-extfile", dir_.sub(name + ".ext")},
                   log);
    };
    return self_signed("ca") && self_signed("other-ca") &&
           signed_by_ca("server", "127.0.0.1",
                        "subjectAltName=IP:127.0.0.1,DNS:" + std::string(kHostName) +
                            "\nextendedKeyUsage=serverAuth\n") &&
           signed_by_ca("client", kClientCertUser, "extendedKeyUsage=clientAuth\n");
}

bool KubeStandin::start() {
    if (pid_ > 0) return true;
    const std::string port_file = dir_.sub("port");
    std::filesystem::remove(port_file);
    std::vector<std::string> args = {kPython,
                                     "-B",
                                     KUBE_API_STANDIN_PATH,
                                     "--root",
                                     root(),
                                     "--cert",
                                     dir_.sub("server.crt"),
                                     "--key",
                                     dir_.sub("server.key"),
                                     "--client-ca",
                                     ca_file(),
                                     "--port-file",
                                     port_file,
                                     "--port",
                                     std::to_string(port_)};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    const std::string log = dir_.sub("standin.log");
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_addopen(&fa, 2, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    const int rc = posix_spawn(&pid_, kPython, &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) {
        pid_ = -1;
        why_ = std::string("cannot run ") + kPython;
        return false;
    }
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(kStartTimeoutMs);
    while (std::chrono::steady_clock::now() < deadline) {
        if (std::filesystem::exists(port_file)) {
            port_ = uint16_t(std::stoi(read_file(port_file)));
            return true;
        }
        int status = 0;
        if (::waitpid(pid_, &status, WNOHANG) == pid_) {
            pid_ = -1;
            why_ = "the stand-in exited: " + read_file(log);
            return false;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    why_ = "the stand-in did not listen within " + std::to_string(kStartTimeoutMs) +
           " ms: " + read_file(log);
    stop();
    return false;
}

void KubeStandin::stop() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
}

std::string KubeStandin::write_kubeconfig(const std::string& name) {
    return write_kubeconfig(name, KubeconfigSpec{});
}

std::string KubeStandin::write_kubeconfig(const std::string& name, const KubeconfigSpec& spec) {
    std::ostringstream cluster, user;
    cluster << "    server: " << (spec.server.empty() ? server() : spec.server) << "\n";
    if (!spec.proxy_url.empty()) cluster << "    proxy-url: " << spec.proxy_url << "\n";
    switch (spec.ca) {
        case Ca::kInline:
            cluster << "    certificate-authority-data: " << base64(read_file(ca_file())) << "\n";
            break;
        case Ca::kFile:
            cluster << "    certificate-authority: ca.crt\n";  // relative: beside the kubeconfig
            break;
        case Ca::kOther:
            cluster << "    certificate-authority-data: "
                    << base64(read_file(dir_.sub("other-ca.crt"))) << "\n";
            break;
        case Ca::kNone:
            break;
    }
    switch (spec.auth) {
        case Auth::kToken:
            user << "    token: " << (spec.token.empty() ? token_ : spec.token) << "\n";
            break;
        case Auth::kTokenFile:
            user << "    tokenFile: " << token_file() << "\n";
            break;
        case Auth::kClientCert:
        case Auth::kClientCertOtherKey:
            user << "    client-certificate-data: " << base64(read_file(client_cert())) << "\n"
                 << "    client-key-data: "
                 << base64(read_file(spec.auth == Auth::kClientCert ? client_key()
                                                                    : dir_.sub("other-ca.key")))
                 << "\n";
            break;
        case Auth::kNone:
            user << "    {}\n";
            break;
    }
    const std::string path = dir_.sub(name);
    write_atomically(path,
                     "apiVersion: v1\n"
                     "kind: Config\n"
                     "current-context: shmipam\n"
                     "contexts:\n"
                     "- name: shmipam\n"
                     "  context:\n"
                     "    cluster: standin\n"
                     "    user: shmipam\n"
                     "clusters:\n"
                     "- name: standin\n"
                     "  cluster:\n" +
                         cluster.str() +
                         "users:\n"
                         "- name: shmipam\n"
                         "  user:\n" +
                         user.str());
    return path;
}

void KubeStandin::set_token(const std::string& t) {
    token_ = t;
    write_atomically(dir_.sub("root/_token"), t + "\n");
}

std::string KubeStandin::rotate_token() {
    set_token("token-" + std::to_string(::getpid()) + "-" + std::to_string(++tokens_made_));
    write_atomically(token_file(), token_ + "\n");
    write_kubeconfig("kubeconfig");
    return token_;
}

void KubeStandin::forbid(const std::string& token_or_user) {
    const std::string path = dir_.sub("root/_forbidden-tokens");
    write_atomically(path, read_file(path) + token_or_user + "\n");
}

void KubeStandin::put_pod(const std::string& ns, const std::string& name, const std::string& uid,
                          const kube::protocol::StringMap& labels,
                          const kube::protocol::StringMap& annotations,
                          const std::vector<kube::protocol::OwnerReference>& owners,
                          const std::string& node_name) {
    json meta = metadata(ns, name, uid);
    if (!labels.empty()) meta["labels"] = labels;
    if (!annotations.empty()) meta["annotations"] = annotations;
    if (!owners.empty()) {
        json refs = json::array();
        for (const auto& o : owners) {
            json r{{"apiVersion", o.api_version},
                   {"kind", o.kind},
                   {"name", o.name},
                   {"uid", o.uid},
                   {"blockOwnerDeletion", true}};
            // The API server leaves controller out when it is false.
            if (o.controller) r["controller"] = true;
            refs.push_back(r);
        }
        meta["ownerReferences"] = refs;
    }
    json spec{{"containers", json::array({{{"name", "main"}, {"image", "pause:3.9"}}})}};
    if (!node_name.empty()) spec["nodeName"] = node_name;
    put_raw(object_path("v1", "pods", ns, name), json{{"apiVersion", "v1"},
                                                      {"kind", "Pod"},
                                                      {"metadata", meta},
                                                      {"spec", spec},
                                                      {"status", {{"phase", "Pending"}}}}
                                                     .dump(1));
}

void KubeStandin::put_statefulset(const std::string& ns, const std::string& name,
                                  std::optional<int64_t> replicas,
                                  std::optional<int64_t> ordinals_start, bool deleting) {
    json meta = metadata(ns, name, "sts-uid-" + name);
    if (deleting) meta["deletionTimestamp"] = "2026-01-01T00:01:00Z";
    json spec{{"serviceName", name}, {"selector", {{"matchLabels", {{"app", name}}}}}};
    if (replicas) spec["replicas"] = *replicas;
    if (ordinals_start) spec["ordinals"] = {{"start", *ordinals_start}};
    put_raw(
        object_path("apps/v1", "statefulsets", ns, name),
        json{{"apiVersion", "apps/v1"}, {"kind", "StatefulSet"}, {"metadata", meta}, {"spec", spec}}
            .dump(1));
}

void KubeStandin::put_vm(const std::string& ns, const std::string& name, bool deleting) {
    json meta = metadata(ns, name, "vm-uid-" + name);
    if (deleting) meta["deletionTimestamp"] = "2026-01-01T00:01:00Z";
    put_raw(object_path("kubevirt.io/v1", "virtualmachines", ns, name),
            json{{"apiVersion", "kubevirt.io/v1"},
                 {"kind", "VirtualMachine"},
                 {"metadata", meta},
                 {"spec", {{"runStrategy", "Always"}}}}
                .dump(1));
}

void KubeStandin::remove_vm(const std::string& ns, const std::string& name) {
    std::filesystem::remove(root() + object_path("kubevirt.io/v1", "virtualmachines", ns, name) +
                            ".json");
}

void KubeStandin::put_raw(const std::string& api_path, const std::string& body) {
    const std::string path = root() + api_path + ".json";
    std::filesystem::create_directories(std::filesystem::path(path).parent_path());
    write_atomically(path, body);
}

void KubeStandin::remove_pod(const std::string& ns, const std::string& name) {
    std::filesystem::remove(root() + object_path("v1", "pods", ns, name) + ".json");
}

void KubeStandin::remove_statefulset(const std::string& ns, const std::string& name) {
    std::filesystem::remove(root() + object_path("apps/v1", "statefulsets", ns, name) + ".json");
}

void KubeStandin::write_control(const std::string& rule_json) {
    write_atomically(dir_.sub("root/_control.json"), rule_json);
}

void KubeStandin::force_status(int status, const std::string& prefix) {
    write_control(json{{"prefix", prefix}, {"status", status}}.dump());
}

void KubeStandin::set_delay(int ms, const std::string& prefix) {
    write_control(json{{"prefix", prefix}, {"delay_ms", ms}}.dump());
}

void KubeStandin::force_body(const std::string& body, int status, const std::string& prefix) {
    write_control(json{{"prefix", prefix}, {"status", status}, {"body", body}}.dump());
}

void KubeStandin::clear_faults() {
    std::filesystem::remove(dir_.sub("root/_control.json"));
}

std::vector<KubeStandin::Request> KubeStandin::requests() const {
    std::vector<Request> out;
    std::istringstream lines(read_file(dir_.sub("root/_requests.log")));
    for (std::string line; std::getline(lines, line);) {
        std::istringstream fields(line);
        Request r;
        if (fields >> r.method >> r.path >> r.status >> r.client_port) out.push_back(r);
    }
    return out;
}

}  // namespace shmipam::testing
