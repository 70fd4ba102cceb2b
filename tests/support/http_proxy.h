// A real HTTP proxy for tests of a kubeconfig's proxy-url: Debian's tinyproxy, run in the
// foreground on a reserved loopback port (test_ports.h), allowing loopback clients only, logging
// every CONNECT it tunnels.
//
//   HttpProxy proxy;
//   ASSERT_TRUE(proxy.ready()) << proxy.why_not_ready();
//   ... proxy-url: proxy.url() ...
//   EXPECT_EQ(proxy.tunnels_to("127.0.0.1:" + port), 1u);
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "tests/support/plugin_runner.h"
#include "tests/support/temp_dir.h"

namespace shmipam::testing {

class HttpProxy {
  public:
    HttpProxy();
    ~HttpProxy();
    HttpProxy(const HttpProxy&) = delete;
    HttpProxy& operator=(const HttpProxy&) = delete;

    bool ready() const { return proxy_ != nullptr; }
    const std::string& why_not_ready() const { return why_; }
    std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
    // How many CONNECT requests for `host_port` ("127.0.0.1:34567") the proxy was asked for.
    size_t tunnels_to(const std::string& host_port) const;

  private:
    TempDir dir_;
    uint16_t port_ = 0;
    std::unique_ptr<Child> proxy_;
    std::string why_;
};

}  // namespace shmipam::testing
