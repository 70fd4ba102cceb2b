// Pool files are bounded (issue 29 item 6): what one file may expand to is refused, naming the
// file and the bound, and the other files' pools keep serving.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "pools/pool_dir.h"

namespace shmipam::pools {
namespace {

const std::string kGood =
    "apiVersion: spiderpool.spidernet.io/v2beta1\nkind: SpiderIPPool\n"
    "metadata: {name: good}\nspec: {subnet: 10.9.0.0/24, ips: [10.9.0.10-10.9.0.20]}\n";

std::string problems_of(const Catalog& c) {
    std::string out;
    for (const auto& p : c.problems()) out += p.file + ": " + p.message + "\n";
    return out;
}

// The billion laughs: 10 levels of 10 aliases each (10^10 nodes once expanded).
std::string bomb() {
    std::string s =
        "apiVersion: spiderpool.spidernet.io/v2beta1\nkind: SpiderIPPool\n"
        "metadata:\n  name: bomb\n  labels:\n"
        "    a: &a [\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\"]\n";
    for (char c = 'b'; c <= 'j'; ++c) {
        const char p = char(c - 1);
        s += std::string("    ") + c + ": &" + c + " [";
        for (int i = 0; i < 10; ++i) s += std::string(i ? "," : "") + "*" + p;
        s += "]\n";
    }
    return s + "spec:\n  subnet: 10.77.0.0/24\n";
}

// Before the bound this ran out of memory (19.8 GB seen): it ran only after the fix.
TEST(PoolBounds, AnAliasBombIsRefusedQuicklyAndTheOtherPoolsServe) {
    // Bounded, the parse takes about 0.1 s (docs/pools.md); unbounded, it grew to 19.8 GB and an
    // ADD meeting it gave no answer in 60 s: half of that tells the two apart on any machine.
    constexpr auto kFarBelowUnbounded = std::chrono::seconds(30);
    Catalog c;
    const auto start = std::chrono::steady_clock::now();
    load_text(c, "bomb.yaml", bomb());
    load_text(c, "good.yaml", kGood);
    c.finish();
    const auto took = std::chrono::steady_clock::now() - start;
    EXPECT_LT(took, kFarBelowUnbounded);
    std::printf("[ bomb     ] refused in %.3f s\n", std::chrono::duration<double>(took).count());
    const std::string p = problems_of(c);
    EXPECT_NE(p.find("bomb.yaml: expands to more than 1,000,000 YAML nodes (the bound for one "
                     "pool file)"),
              std::string::npos)
        << p;
    EXPECT_NE(c.pool("good"), nullptr);
    EXPECT_EQ(c.pool("bomb"), nullptr);
}

TEST(PoolBounds, AFileOverTheSizeBoundIsRefused) {
    Catalog c;
    load_text(c, "big.yaml", kGood + "# " + std::string((size_t(16) << 20), 'x') + "\n");
    c.finish();
    const std::string p = problems_of(c);
    EXPECT_NE(p.find("big.yaml: is larger than 16 MiB (the bound for one pool file)"),
              std::string::npos)
        << p;
    EXPECT_EQ(c.pool("good"), nullptr);
}

TEST(PoolBounds, TooManyAliasesAreRefused) {
    std::string s = kGood + "---\nx: &a 1\ny: [";
    for (int i = 0; i < 10'001; ++i) s += std::string(i ? "," : "") + "*a";
    s += "]\n";
    Catalog c;
    load_text(c, "aliases.yaml", s);
    c.finish();
    const std::string p = problems_of(c);
    EXPECT_NE(p.find("aliases.yaml: uses more than 10000 YAML aliases"), std::string::npos) << p;
}

TEST(PoolBounds, TooDeepIsRefused) {
    std::string s = "a: " + std::string(100, '[') + std::string(100, ']') + "\n";
    Catalog c;
    load_text(c, "deep.yaml", s);
    c.finish();
    const std::string p = problems_of(c);
    EXPECT_NE(p.find("deep.yaml: nests deeper than 64 levels"), std::string::npos) << p;
}

}  // namespace
}  // namespace shmipam::pools

#include "kube/yaml_json.h"

namespace shmipam::kube {
namespace {

// Before the bound this ran out of memory: it ran only after the fix.
TEST(KubeconfigBounds, AnAliasBombKubeconfigIsRefused) {
    std::string s = "a: &a [\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\"]\n";
    for (char c = 'b'; c <= 'j'; ++c) {
        s += std::string(1, c) + ": &" + c + " [";
        for (int i = 0; i < 10; ++i) s += std::string(i ? "," : "") + "*" + char(c - 1);
        s += "]\n";
    }
    auto r = yaml_to_json(s, "kubeconfig");
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().msg.find("kubeconfig expands to more than 100,000 YAML nodes"),
              std::string::npos)
        << r.error().msg;
}

}  // namespace
}  // namespace shmipam::kube
