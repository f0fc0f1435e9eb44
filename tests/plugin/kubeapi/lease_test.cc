// neuron-dra-api's one slice writer per node (plugin/kubeapi/lease.h) against the API stand-in
// over HTTPS: the first candidate takes the lease, the second waits while it renews, takes it at
// its next retry after a release, only after the duration when the holder died, and a holder
// whose API server went away stops leading at its renew deadline. Durations are short (1 s lease,
// 600 ms renew deadline, 200 ms retry; three times that under a sanitizer) through the options;
// waits poll with a deadline.

#include "plugin/kubeapi/lease.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "driver-sim/controlplane/api_server.h"
#include "plugin/kubeapi/client.h"
#include "tests/support/api_stand_in.h"
#include "tests/support/sanitizer.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace neuron::kubeapi {
namespace {

using neuron::testing::WaitUntil;
using nlohmann::json;
using sim::apiserver::ApiServer;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

// Under a sanitizer every period is kSanitizerSlowdown times longer: a renewal over HTTPS there
// can take longer than a 200 ms request timeout on a loaded machine, and a renewal the server
// stored but the client gave up on moves the holder's deadline earlier than the test's clock.
constexpr int kScale = neuron::testing::kSanitizerSlowdown;
constexpr milliseconds kDuration{1000 * kScale};  // leaseDurationSeconds is whole seconds
constexpr milliseconds kRenewDeadline{600 * kScale};
constexpr milliseconds kRetry{200 * kScale};
// What a request and a thread's wake-up may add to a period on a loaded 2-core machine.
constexpr milliseconds kSlack{400 * kScale};

class LeaseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    api_ = *neuron::testing::StartApiStandIn(dir_.path());
    // Requests end within a retry period, as neuron-dra-api's lease client's do.
    ClientConfig config = neuron::testing::StandInClient(*api_, dir_.path());
    config.timeout = config.connect_timeout = kRetry;
    client_ = std::make_unique<Client>(config);
  }
  static LeaseOptions Options(const std::string& identity) {
    LeaseOptions o;
    o.name = LeaseName("node-1");
    o.identity = identity;
    o.duration = kDuration;
    o.renew_deadline = kRenewDeadline;
    o.retry = kRetry;
    return o;
  }
  json Stored() {
    const auto a =
        api_->store().Get(*sim::apiserver::FindKind("/apis/coordination.k8s.io/v1/", "leases"),
                          "neuron-system", "neuron-dra-api-node-1");
    return a.code == 200 ? a.body : json();
  }

  neuron::testing::TempDir dir_;
  std::unique_ptr<ApiServer> api_;
  std::unique_ptr<Client> client_;
};

TEST(LeaseOptionsTest, DurationsMustBeInOrder) {
  LeaseOptions o;
  o.name = "n";
  o.identity = "a";
  EXPECT_TRUE(CheckLeaseTimes(o).ok());  // 15 s, 10 s, 2 s: client-go's defaults
  o.renew_deadline = o.duration;
  EXPECT_TRUE(absl::IsInvalidArgument(CheckLeaseTimes(o)));
  o.renew_deadline = milliseconds(2400);  // 1.2 x retry: one try only
  EXPECT_TRUE(absl::IsInvalidArgument(CheckLeaseTimes(o)));
  o.renew_deadline = milliseconds(10000);
  o.duration = milliseconds(1500);  // leaseDurationSeconds is whole seconds
  EXPECT_TRUE(absl::IsInvalidArgument(CheckLeaseTimes(o)));
}

TEST(LeaseOptionsTest, NamesStayDnsSubdomains) {
  EXPECT_EQ(LeaseName("ip-10-0-1-2.ec2.internal"), "neuron-dra-api-ip-10-0-1-2.ec2.internal");
  // A node name of 253 characters (the API's limit): cut, with a hash of the whole name.
  const std::string a = std::string(60, 'a') + "." + std::string(60, 'b') + "." +
                        std::string(60, 'c') + "." + std::string(61, 'd') + "." + "e" +
                        std::string(7, 'f');
  ASSERT_EQ(a.size(), 253U);
  std::string b = a;
  b.back() = 'g';
  EXPECT_LE(LeaseName(a).size(), 253U);
  EXPECT_NE(LeaseName(a), LeaseName(b));
  EXPECT_TRUE(sim::apiserver::IsDnsSubdomain(LeaseName(a))) << LeaseName(a);
  EXPECT_EQ(FormatMicroTime(
                std::chrono::system_clock::time_point(std::chrono::microseconds(1796601001123456))),
            "2026-12-06T23:50:01.123456Z");
}

TEST_F(LeaseTest, TheFirstAcquiresTheSecondWaitsWhileItRenews) {
  LeaderLease first(*client_, Options("pod-a_uid-a"));
  LeaderLease second(*client_, Options("pod-b_uid-b"));
  std::atomic<int> first_started{0};
  std::atomic<int> second_started{0};
  first.Start([&] { ++first_started; }, [] {});
  ASSERT_TRUE(WaitUntil([&] { return first.leading(); }, kRetry + kSlack));
  const json created = Stored();
  ASSERT_FALSE(created.is_null());
  EXPECT_EQ(created["spec"]["holderIdentity"], "pod-a_uid-a");
  EXPECT_EQ(created["spec"]["leaseDurationSeconds"], kDuration.count() / 1000);
  EXPECT_EQ(created["spec"]["leaseTransitions"], 0);

  second.Start([&] { ++second_started; }, [] {});
  // Two and a half durations: the second would have taken over had the first stopped renewing.
  const auto until = Clock::now() + kDuration * 5 / 2;
  while (Clock::now() < until) {
    ASSERT_FALSE(second.leading());
    std::this_thread::sleep_for(milliseconds(20));
  }
  EXPECT_EQ(second.holder(), "pod-a_uid-a");
  EXPECT_TRUE(first.leading());
  EXPECT_EQ(first_started, 1);
  EXPECT_EQ(second_started, 0);
  const json renewed = Stored();
  EXPECT_GT(renewed["spec"]["renewTime"].get<std::string>(),
            created["spec"]["renewTime"].get<std::string>());
  EXPECT_EQ(renewed["spec"]["acquireTime"], created["spec"]["acquireTime"]);
}

TEST_F(LeaseTest, AReleaseHandsOverWithinOneRetry) {
  LeaderLease first(*client_, Options("a"));
  LeaderLease second(*client_, Options("b"));
  std::atomic<bool> first_writing{false};
  first.Start([&] { first_writing = true; }, [&] { first_writing = false; });
  ASSERT_TRUE(WaitUntil([&] { return first.leading(); }, kRetry + kSlack));
  second.Start([] {}, [] {});
  ASSERT_TRUE(WaitUntil([&] { return second.holder() == "a"; }, kRetry + kSlack));

  const auto stopped = Clock::now();
  first.Stop();
  EXPECT_FALSE(first_writing);  // its writes ended before the release
  EXPECT_EQ(Stored()["spec"]["holderIdentity"], "");
  ASSERT_TRUE(WaitUntil([&] { return second.leading(); }, kRetry + kSlack));
  // Well before the duration a holder that died would keep it.
  EXPECT_LT(Clock::now() - stopped, kDuration);
  const json taken = Stored();
  EXPECT_EQ(taken["spec"]["holderIdentity"], "b");
  EXPECT_EQ(taken["spec"]["leaseTransitions"], 1);
}

TEST_F(LeaseTest, AHolderThatDiedIsTakenOverAfterTheDurationNotBefore) {
  // The first takes the lease once and never renews nor releases it: a process that was killed.
  const auto before = Clock::now();
  {
    LeaderLease dead(*client_, Options("a"));
    ASSERT_TRUE(*dead.TryAcquireOrRenew());
  }
  EXPECT_EQ(Stored()["spec"]["holderIdentity"], "a");
  const auto after = Clock::now();

  LeaderLease second(*client_, Options("b"));
  second.Start([] {}, [] {});
  while (Clock::now() < before + kDuration) {
    ASSERT_FALSE(second.leading()) << "taken over before the lease expired";
    std::this_thread::sleep_for(milliseconds(10));
  }
  ASSERT_TRUE(WaitUntil(
      [&] { return second.leading(); },
      std::chrono::ceil<milliseconds>(after + kDuration + kRetry + kSlack - Clock::now())));
  EXPECT_EQ(Stored()["spec"]["leaseTransitions"], 1);
}

TEST_F(LeaseTest, AHolderWhoseApiServerWentAwayStopsLeadingAtItsRenewDeadline) {
  LeaderLease holder(*client_, Options("a"));
  std::atomic<int> stopped{0};
  holder.Start([] {}, [&] { ++stopped; });
  ASSERT_TRUE(WaitUntil([&] { return holder.leading(); }, kRetry + kSlack));
  // Right after a renewal, so that the deadline counts from about now.
  const std::string renewed = Stored()["spec"]["renewTime"];
  ASSERT_TRUE(WaitUntil([&] { return Stored()["spec"]["renewTime"] != renewed; }, kRetry + kSlack));
  const auto gone = Clock::now();
  ASSERT_TRUE(api_->SetReachable(false).ok());
  ASSERT_TRUE(WaitUntil([&] { return !holder.leading(); }, kRenewDeadline + kRetry + kSlack));
  const auto lost = Clock::now();
  EXPECT_EQ(stopped, 1);
  // Not at the first failed renewal: the deadline counts from the last one that worked.
  EXPECT_GE(lost - gone, kRenewDeadline - kRetry);
  // Before a candidate could take it over.
  EXPECT_LT(lost - gone, kDuration);

  // Back, it is still the holder of record: it leads again.
  ASSERT_TRUE(api_->SetReachable(true).ok());
  ASSERT_TRUE(WaitUntil([&] { return holder.leading(); }, kRetry * 2 + kSlack));
}

TEST_F(LeaseTest, RacingCandidatesLeaveExactlyOneHolder) {
  constexpr int kCandidates = 4;
  int conflicts = 0;
  for (int round = 0; round < 10; ++round) {
    std::vector<std::unique_ptr<LeaderLease>> leases;
    leases.reserve(kCandidates);
    for (int i = 0; i < kCandidates; ++i) {
      leases.push_back(
          std::make_unique<LeaderLease>(*client_, Options(fmt::format("pod-{}-{}", round, i))));
    }
    std::atomic<bool> go{false};
    std::vector<absl::StatusOr<bool>> results(kCandidates, false);
    std::vector<std::thread> threads;
    threads.reserve(kCandidates);
    for (int i = 0; i < kCandidates; ++i) {
      threads.emplace_back([&, i] {
        while (!go) std::this_thread::yield();
        results[i] = leases[i]->TryAcquireOrRenew();
      });
    }
    go = true;
    for (std::thread& t : threads) t.join();
    int holders = 0;
    std::string winner;
    for (int i = 0; i < kCandidates; ++i) {
      if (results[i].ok() && *results[i]) {
        ++holders;
        winner = fmt::format("pod-{}-{}", round, i);
      } else if (!results[i].ok()) {
        // Only the API's answer to a lost race: 409 on update (Aborted) or create.
        EXPECT_TRUE(absl::IsAborted(results[i].status()) ||
                    absl::IsAlreadyExists(results[i].status()))
            << results[i].status();
        ++conflicts;
      }
    }
    ASSERT_EQ(holders, 1) << "round " << round;
    EXPECT_EQ(Stored()["spec"]["holderIdentity"], winner);
    // Released, so that the next round's candidates race for it again (an update, not a create).
    ASSERT_TRUE(leases[std::stoi(winner.substr(winner.rfind('-') + 1))]->Release().ok());
  }
  // With four writers at once some lose to a 409; the count is only informative.
  RecordProperty("conflicts", conflicts);
}

}  // namespace
}  // namespace neuron::kubeapi
