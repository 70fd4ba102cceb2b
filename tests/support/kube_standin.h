// The Kubernetes API server for tests: tests/support/kube_api_standin.py (Python's standard
// library: no kube-apiserver package exists on Debian here; docs/testing.md), run as a process on
// a loopback port with HTTPS, a bearer token re-read on every request, client certificates of the
// test CA, and the objects a test puts. Everything a test changes is a file the stand-in reads
// again on the next request; the process is killed by pid when the fixture goes.
//
//   KubeStandin api;
//   ASSERT_TRUE(api.ready()) << api.why_not_ready();
//   api.put_pod("default", "web-0", "uid-1", {{"app", "web"}});
//   run shmipam-kube with api.kubeconfig() ...
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kube/pod_protocol.h"
#include "tests/support/temp_dir.h"

namespace shmipam::testing {

class KubeStandin {
  public:
    // Who a bearer token authenticates as (a 403's message names it), and the client
    // certificate's common name.
    static constexpr const char* kTokenUser = "system:serviceaccount:kube-system:shmipam";
    static constexpr const char* kClientCertUser = "shmipam-node";
    // A host name the stand-in's certificate is also valid for, beside 127.0.0.1: a test that
    // reaches it by name maps it to 127.0.0.1 (an /etc/hosts of its own).
    static constexpr const char* kHostName = "kube-api.shmipam.test";

    // Makes the certificates (openssl), starts the stand-in and writes kubeconfig(); ready()
    // says whether it all worked, why_not_ready() why not.
    KubeStandin();
    ~KubeStandin();
    KubeStandin(const KubeStandin&) = delete;
    KubeStandin& operator=(const KubeStandin&) = delete;

    bool ready() const { return ready_; }
    const std::string& why_not_ready() const { return why_; }
    uint16_t port() const { return port_; }
    std::string server() const;  // https://127.0.0.1:PORT
    const TempDir& dir() const { return dir_; }

    // ---- kubeconfigs ----------------------------------------------------------------------
    enum class Auth {
        kToken,
        kTokenFile,
        kClientCert,
        kClientCertOtherKey,  // the client certificate with a key that is not its own
        kNone,                // no credentials: anonymous
    };
    enum class Ca {
        kInline,  // certificate-authority-data: the CA that signed the stand-in's certificate
        kFile,    // certificate-authority: its path, relative to the kubeconfig
        kOther,   // certificate-authority-data of a CA that signed nothing here
        kNone,    // no CA: the system's (which do not know the test CA)
    };
    struct KubeconfigSpec {
        Auth auth = Auth::kToken;
        Ca ca = Ca::kInline;
        std::string token;      // kToken: "" for the accepted one
        std::string server;     // "" for the stand-in's
        std::string proxy_url;  // the cluster's proxy-url: "" for none
    };
    // Writes a kubeconfig (YAML, as kubectl writes one) at dir()/name; its path.
    std::string write_kubeconfig(const std::string& name, const KubeconfigSpec& spec);
    std::string write_kubeconfig(const std::string& name);  // the default spec
    // The default kubeconfig, dir()/kubeconfig: token and CA data inline.
    std::string kubeconfig() const { return dir_.sub("kubeconfig"); }
    // What Auth::kTokenFile kubeconfigs name (dir()/token); rotate_token() rewrites it.
    std::string token_file() const { return dir_.sub("token"); }
    std::string ca_file() const { return dir_.sub("ca.crt"); }
    std::string client_cert() const { return dir_.sub("client.crt"); }
    std::string client_key() const { return dir_.sub("client.key"); }

    // ---- authentication -------------------------------------------------------------------
    const std::string& token() const { return token_; }
    // The stand-in accepts `t` alone from its next request on.
    void set_token(const std::string& t);
    // A new accepted token (the old one refused from now on), written to token_file() and to
    // the default kubeconfig, as `shmipamctl kubeconfig` rewrites it; the new token.
    std::string rotate_token();
    // Requests with this token (or from this client certificate's user) answered 403.
    void forbid(const std::string& token_or_user);

    // ---- objects, as the API server gives them -------------------------------------------
    void put_pod(const std::string& ns, const std::string& name, const std::string& uid,
                 const kube::protocol::StringMap& labels = {},
                 const kube::protocol::StringMap& annotations = {},
                 const std::vector<kube::protocol::OwnerReference>& owners = {},
                 const std::string& node_name = "");
    // replicas, ordinals_start: nullopt leaves the field out (the API's defaults apply).
    void put_statefulset(const std::string& ns, const std::string& name,
                         std::optional<int64_t> replicas, std::optional<int64_t> ordinals_start,
                         bool deleting = false);
    // Any body at an API path ("/api/v1/namespaces/default/pods/x").
    void put_raw(const std::string& api_path, const std::string& body);
    void remove_pod(const std::string& ns, const std::string& name);
    void remove_statefulset(const std::string& ns, const std::string& name);
    // A KubeVirt VirtualMachine (kubevirt.io/v1), being deleted or not.
    void put_vm(const std::string& ns, const std::string& name, bool deleting = false);
    void remove_vm(const std::string& ns, const std::string& name);

    // ---- faults (for every path, or those starting with `prefix`) ------------------------
    void force_status(int status, const std::string& prefix = "");  // a Status of that code
    void set_delay(int ms, const std::string& prefix = "");         // then the normal answer
    void force_body(const std::string& body, int status = 200, const std::string& prefix = "");
    void clear_faults();
    // Rules of ROOT/_control.json as they are (kube_api_standin.py): a reset, a Retry-After,
    // a rule for the first N requests only ("times").
    void set_faults(const std::string& rules_json) { write_control(rules_json); }

    // ---- what reached it ------------------------------------------------------------------
    struct Request {
        std::string method, path;
        int status = 0;
        int client_port = 0;  // requests over one connection share it
    };
    std::vector<Request> requests() const;
    size_t request_count() const { return requests().size(); }

    // ---- the API server down and back ----------------------------------------------------
    void stop();   // SIGTERM, and reaped: its port refuses connections
    bool start();  // again on the same port; true once it listens
    bool running() const { return pid_ > 0; }

  private:
    bool make_certificates();
    std::string root() const { return dir_.sub("root"); }
    void write_control(const std::string& rule_json);

    TempDir dir_;
    uint16_t port_ = 0;
    pid_t pid_ = -1;
    std::string token_;
    int tokens_made_ = 0;
    bool ready_ = false;
    std::string why_;
};

}  // namespace shmipam::testing
