// Kubernetes' naming rules (kube/names.h), as apimachinery's validation states them.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kube/names.h"

namespace shmipam::kube {
namespace {

TEST(KubeNames, NamespacesAreDnsLabels) {
    for (const std::string& good :
         std::vector<std::string>{"shop", "a", "kube-system", "a1", "1a", std::string(63, 'x')})
        EXPECT_FALSE(not_a_dns_label(good).has_value()) << good;
    for (const std::string& bad : std::vector<std::string>{"", "Shop", "-shop", "shop-", "sh op",
                                                           "a.b", "sh_op", std::string(64, 'x')})
        EXPECT_TRUE(not_a_dns_label(bad).has_value()) << bad;
}

TEST(KubeNames, PodNamesAreDnsSubdomains) {
    for (const char* good : {"db-0", "db.v2-0", "a", "web-5d4f7b8c9-x2x7z", "a.b.c"})
        EXPECT_FALSE(not_a_dns_subdomain(good).has_value()) << good;
    for (const std::string& bad :
         std::vector<std::string>{"", "db 1", "-db-1", "db-1-", "db-1.", ".db", "a..b", "a.-b",
                                  "Db-1", "db/1", std::string(254, 'x')})
        EXPECT_TRUE(not_a_dns_subdomain(bad).has_value()) << bad;
    EXPECT_FALSE(not_a_dns_subdomain(std::string(253, 'x')).has_value());
}

}  // namespace
}  // namespace shmipam::kube
