// The fixture of every test against a real etcd: a new 3-member cluster per test (skipped where
// etcd is not installed, failed in CI), and a client config that reaches it.
#pragma once

#include <gtest/gtest.h>

#include <memory>

#include "cluster/etcd_client.h"
#include "tests/support/etcd_cluster.h"

namespace shmipam::testing {

class ThreeEtcdMembers : public ::testing::Test {
  protected:
    void SetUp() override {
        SHMIPAM_REQUIRE_ETCD();
        etcd = std::make_unique<EtcdCluster>(3);
        ASSERT_TRUE(etcd->ready()) << etcd->why_not_ready();
    }
    cluster::EtcdConfig client_config() const {
        cluster::EtcdConfig c;
        c.endpoints = etcd->client_urls();
        return c;
    }
    std::unique_ptr<EtcdCluster> etcd;
};

}  // namespace shmipam::testing
