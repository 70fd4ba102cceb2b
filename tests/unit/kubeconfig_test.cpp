// The kubeconfig as kubectl reads it (kube/kubeconfig.h): the current context's cluster and
// user, data fields and files (relative to the kubeconfig), tokens and token files, client
// certificates; every kubeconfig that cannot be used is code 7 naming the file and what is wrong.
#include "kube/kubeconfig.h"

#include <gtest/gtest.h>

#include "base/base64.h"
#include "tests/support/temp_dir.h"

namespace shmipam::kube {
namespace {

using testing::TempDir;
using testing::write_file;

// "PEM" in base64, standing for a certificate's data field.
constexpr const char* kCaData = "Q0EgUEVN";        // "CA PEM"
constexpr const char* kCertData = "Q0VSVCBQRU0=";  // "CERT PEM"
constexpr const char* kKeyData = "S0VZIFBFTQ==";   // "KEY PEM"

std::string config(const std::string& cluster, const std::string& user,
                   const std::string& current = "current-context: ctx\n") {
    return "apiVersion: v1\nkind: Config\n" + current +
           "contexts:\n"
           "- name: other\n"
           "  context: {cluster: elsewhere, user: someone}\n"
           "- name: ctx\n"
           "  context:\n"
           "    cluster: c1\n"
           "    user: u1\n"
           "    namespace: kube-system\n"
           "clusters:\n"
           "- name: elsewhere\n"
           "  cluster: {server: https://10.9.9.9:6443}\n"
           "- name: c1\n"
           "  cluster:\n" +
           cluster +
           "users:\n"
           "- name: u1\n"
           "  user:\n" +
           user;
}

Expected<Kubeconfig> parse(const std::string& text, const std::string& path = "/etc/kc") {
    return parse_kubeconfig(text, path);
}

void expect_refused(const Expected<Kubeconfig>& k, const std::string& said,
                    const std::string& path = "/etc/kc") {
    ASSERT_FALSE(k) << said;
    EXPECT_EQ(k.error().code, Code::kInvalidConfig);
    EXPECT_NE(k.error().msg.find("kubeconfig " + path), std::string::npos) << k.error().msg;
    EXPECT_NE(k.error().msg.find(said), std::string::npos) << k.error().msg;
}

TEST(Kubeconfig, TheCurrentContextsClusterAndUserAreRead) {
    auto k = parse(config(std::string("    server: https://10.0.0.1:6443/\n") +
                              "    certificate-authority-data: " + kCaData + "\n",
                          "    token: abc.def\n"));
    ASSERT_TRUE(k) << k.error().msg;
    EXPECT_EQ(k->path, "/etc/kc");
    EXPECT_EQ(k->context, "ctx");
    EXPECT_EQ(k->cluster, "c1");
    EXPECT_EQ(k->user, "u1");
    EXPECT_EQ(k->server, "https://10.0.0.1:6443") << "the trailing slash dropped";
    ASSERT_TRUE(k->ca_pem);
    EXPECT_EQ(*k->ca_pem, "CA PEM");
    EXPECT_TRUE(k->verify_tls);
    EXPECT_EQ(k->token, "abc.def");
    EXPECT_TRUE(k->client_cert_pem.empty());
}

TEST(Kubeconfig, JsonIsReadToo) {
    auto k = parse(R"({"current-context": "x", "contexts": [{"name": "x", "context":
        {"cluster": "c", "user": "u"}}], "clusters": [{"name": "c", "cluster":
        {"server": "https://api:443", "insecure-skip-tls-verify": true}}],
        "users": [{"name": "u", "user": {"token": "t"}}]})");
    ASSERT_TRUE(k) << k.error().msg;
    EXPECT_EQ(k->server, "https://api:443");
    EXPECT_FALSE(k->verify_tls);
    EXPECT_FALSE(k->ca_pem) << "no CA: the system's";
}

TEST(Kubeconfig, FilesAreReadRelativeToTheKubeconfigsDirectory) {
    TempDir dir;
    write_file(dir.sub("pki/ca.crt"), "CA FROM FILE");
    write_file(dir.sub("pki/client.crt"), "CERT FROM FILE");
    write_file(dir.sub("pki/client.key"), "KEY FROM FILE");
    write_file(dir.sub("token"), "  tok-from-file\n");
    write_file(dir.sub("kc"), config("    server: https://k:6443\n"
                                     "    certificate-authority: pki/ca.crt\n",
                                     "    client-certificate: pki/client.crt\n"
                                     "    client-key: " +
                                         dir.sub("pki/client.key") +
                                         "\n"
                                         "    tokenFile: token\n"
                                         "    token: ignored-for-the-file\n"));
    auto k = read_kubeconfig(dir.sub("kc"));
    ASSERT_TRUE(k) << k.error().msg;
    EXPECT_EQ(*k->ca_pem, "CA FROM FILE");
    EXPECT_EQ(k->client_cert_pem, "CERT FROM FILE");
    EXPECT_EQ(k->client_key_pem, "KEY FROM FILE");
    EXPECT_EQ(k->token, "tok-from-file") << "tokenFile wins, trimmed";
}

TEST(Kubeconfig, DataFieldsWinOverFiles) {
    auto k = parse(config(std::string("    server: https://k\n") +
                              "    certificate-authority: /nonexistent/ca.crt\n" +
                              "    certificate-authority-data: " + kCaData + "\n",
                          std::string("    client-certificate-data: ") + kCertData + "\n" +
                              "    client-key-data: " + kKeyData + "\n"));
    ASSERT_TRUE(k) << k.error().msg;
    EXPECT_EQ(*k->ca_pem, "CA PEM");
    EXPECT_EQ(k->client_cert_pem, "CERT PEM");
    EXPECT_EQ(k->client_key_pem, "KEY PEM");
    EXPECT_TRUE(k->token.empty());
}

TEST(Kubeconfig, AContextWithoutAUserIsAnonymous) {
    auto k = parse(
        "current-context: a\ncontexts:\n- name: a\n  context: {cluster: c}\n"
        "clusters:\n- name: c\n  cluster: {server: 'https://k'}\n");
    ASSERT_TRUE(k) << k.error().msg;
    EXPECT_TRUE(k->token.empty());
    EXPECT_TRUE(k->client_cert_pem.empty());
}

TEST(Kubeconfig, WhatCannotBeUsedIsRefusedNamingTheFileAndWhatIsWrong) {
    const std::string server = "    server: https://k:6443\n";
    const std::string token = "    token: t\n";
    expect_refused(read_kubeconfig("/nonexistent/kc"), "cannot be read: No such file",
                   "/nonexistent/kc");
    expect_refused(parse("a: [b\n"), "is not valid YAML");
    expect_refused(parse("- just\n- a list\n"), "not a mapping");
    expect_refused(parse(config(server, token, "")), "has no current-context");
    expect_refused(parse(config(server, token, "current-context: gone\n")),
                   "context \"gone\" (its current-context) is not in its contexts");
    expect_refused(parse(config(server, token, "current-context: other\n")),
                   "user \"someone\" (of context \"other\") is not in its users");
    expect_refused(parse(config("    certificate-authority-data: Q0E=\n", token)),
                   "cluster \"c1\" has no server");
    expect_refused(parse(config("    server: 10.0.0.1:6443\n", token)), "not an https://");
    expect_refused(parse(config("    server: 6443\n", token)), "server is not a string");
    expect_refused(parse(config(server + "    certificate-authority-data: Q0E*\n", token)),
                   "cluster \"c1\"'s certificate-authority-data is not base64");
    expect_refused(parse(config(server,
                                "    client-certificate-data: Q0E\n"
                                "    client-key-data: Q0E=\n")),
                   "user \"u1\"'s client-certificate-data is not base64");
    expect_refused(
        parse(config(server + "    certificate-authority: /nonexistent/ca.crt\n", token)),
        "certificate-authority /nonexistent/ca.crt cannot be read");
    expect_refused(parse(config(server, "    tokenFile: /nonexistent/token\n")),
                   "tokenFile /nonexistent/token cannot be read");
    expect_refused(
        parse(config(server, std::string("    client-certificate-data: ") + kCertData + "\n")),
        "client-certificate without its client-key");
    expect_refused(parse(config(server, "    exec: {command: aws}\n")), "authenticates by exec");
    expect_refused(parse(config(server + "    proxy-url: ftp://proxy:3128\n", token)),
                   "proxy-url \"ftp://proxy:3128\" is not an http://, https:// or socks5:// URL");
    for (const char* proxy : {"http://proxy:3128", "https://proxy:3129", "socks5://proxy:1080"}) {
        auto proxied = parse(config(server + "    proxy-url: " + proxy + "\n", token));
        ASSERT_TRUE(proxied) << proxied.error().msg;
        EXPECT_EQ(proxied->proxy_url, proxy);
    }
    expect_refused(parse(config(server + "    insecure-skip-tls-verify: yes-please\n", token)),
                   "insecure-skip-tls-verify is not true or false");
    expect_refused(parse(config(server + "    tls-server-name: \"api internal\"\n", token)),
                   "tls-server-name \"api internal\" is not a host name");
    auto sni = parse(config(server + "    tls-server-name: api.internal\n", token));
    ASSERT_TRUE(sni) << sni.error().msg;
    EXPECT_EQ(sni->tls_server_name, "api.internal");
    expect_refused(parse(config(server + "    insecure-skip-tls-verify: true\n" +
                                    "    certificate-authority-data: " + kCaData + "\n",
                                token)),
                   "both a certificate-authority and insecure-skip-tls-verify");
    expect_refused(parse("current-context: ctx\ncontexts:\n- name: ctx\n  context: {user: u}\n"),
                   "names no cluster");
    expect_refused(parse("current-context: ctx\ncontexts: {ctx: 1}\n"), "contexts is not a list");
    TempDir dir;
    write_file(dir.sub("empty-token"), "\n");
    expect_refused(parse(config(server, "    tokenFile: " + dir.sub("empty-token") + "\n")),
                   "is empty");
}

// A token (or a client key) is never sent over plain http://; an anonymous user may be.
TEST(Kubeconfig, CredentialsOverPlainHttpAreRefused) {
    const std::string plain = "    server: http://k:8080\n";
    expect_refused(parse(config(plain, "    token: t\n")), "would travel in clear");
    auto anonymous = parse(
        "current-context: a\ncontexts:\n- name: a\n  context: {cluster: c}\n"
        "clusters:\n- name: c\n  cluster: {server: 'http://k:8080'}\n");
    EXPECT_TRUE(anonymous) << anonymous.error().msg;
}

TEST(Kubeconfig, TheUserNotInUsersIsRefused) {
    auto k = parse(
        "current-context: a\ncontexts:\n- name: a\n  context: {cluster: c, user: x}\n"
        "clusters:\n- name: c\n  cluster: {server: 'https://k'}\nusers: []\n");
    expect_refused(k, "user \"x\" (of context \"a\") is not in its users");
}

TEST(KubeBase64, StrictDecodingAcceptsWhatGoAcceptsAndRefusesTheRest) {
    EXPECT_EQ(base::base64_decode_strict(""), std::string());
    EXPECT_EQ(base::base64_decode_strict("Zg=="), "f");
    EXPECT_EQ(base::base64_decode_strict("Zm8="), "fo");
    EXPECT_EQ(base::base64_decode_strict("Zm9v"), "foo");
    EXPECT_EQ(base::base64_decode_strict("Zm9vYmFy"), "foobar");
    EXPECT_EQ(base::base64_decode_strict("Zm9v\nYmFy\r\n"), "foobar") << "line breaks ignored";
    EXPECT_EQ(base::base64_decode_strict("AP8="), std::string("\0\xff", 2));
    for (const char* bad : {"Zg", "Zg=", "Zm9", "Z===", "Zg==Zg==", "Zm9v!", "Zm 9v", "=Zm9"}) {
        EXPECT_FALSE(base::base64_decode_strict(bad)) << bad;
    }
}

}  // namespace
}  // namespace shmipam::kube
