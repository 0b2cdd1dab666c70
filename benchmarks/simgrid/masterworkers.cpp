/* The volatile-hosts scenario of skylease (docs/decisions/simgrid-scenario.md) in SimGrid's S4U API,
 * for benchmarks/bench_simgrid.py. It grew out of SimGrid's app-masterworkers example: a master hands out
 * independent tasks, here to workers that ask for work (a pull, one task at a time), on hosts that are
 * turned off and on from an availability trace.
 *
 *   masterworkers INSTANCE      (the binary file of skylease.sim.volatile; prints one JSON line)
 *
 * The platform: one star zone, each host (and the master's) joined to the centre by one FATPIPE link of
 * zero latency, so the zero-byte messages take no simulated time and never contend.
 *
 * Actors:
 * - master (on the master host, never off): a FIFO queue of task ids and a FIFO of the workers waiting
 *   for work; each request or wake-up message dispatches the head of the queue to the longest-waiting
 *   worker.
 * - worker (one per host, auto-restarted by SimGrid when its host comes back on): asks the master for a
 *   task, executes its flops at the host's speed, records the completion, asks again.
 * - switcher (on the master host): walks every host's on/off boundaries in time order and turns hosts
 *   off and on (a turned-off host's worker is killed by SimGrid). When it turns a host off, the host's
 *   task goes back to the head of the queue at that moment and the master is woken to re-dispatch it.
 *
 * Same-instant rules, as in skylease.sim.volatile: at one instant (1) tasks that complete are done, then
 * (2) hosts go off, then (3) hosts come on. (1): a worker records its completion in the shared state
 * before its next simcall, and the switcher yields once after waking, so the workers woken with it run
 * first. (2) before (3): the switcher takes every boundary due now and turns the hosts off before it
 * turns any on. At t = 0 the hosts on ask for work in index order (their workers are created in that
 * order), the hosts off at 0 being off before anything runs.
 *
 * The state shared by the actors is plain memory: SimGrid runs its actors one at a time in one thread.
 */
#include <simgrid/s4u.hpp>

#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <functional>
#include <queue>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace sg4 = simgrid::s4u;

namespace {

struct Instance {
  uint64_t n = 0, k = 0, m = 0;
  std::vector<double> speed;     // flop/s per host
  std::vector<uint64_t> bounds;  // host i's intervals: bounds[i] .. bounds[i+1]
  std::vector<double> iv;        // (on, off) pairs, off may be +inf
  std::vector<double> work;      // flops per task, queue order
};

template <typename T> bool read_array(FILE* f, std::vector<T>& v, uint64_t count)
{
  v.resize(count);
  return count == 0 || fread(v.data(), sizeof(T), count, f) == count;
}

bool read_instance(const char* path, Instance& in)
{
  FILE* f = fopen(path, "rb");
  if (f == nullptr)
    return false;
  char magic[8];
  uint64_t head[3];
  bool ok = fread(magic, 1, 8, f) == 8 && memcmp(magic, "SKYVOL1\n", 8) == 0 && fread(head, 8, 3, f) == 3;
  if (ok) {
    in.n = head[0];
    in.k = head[1];
    in.m = head[2];
    ok = read_array(f, in.speed, in.n) && read_array(f, in.bounds, in.n + 1) && read_array(f, in.iv, 2 * in.k) &&
         read_array(f, in.work, in.m) && fgetc(f) == EOF;
  }
  fclose(f);
  return ok;
}

// Messages are zero-byte and carry their meaning in the pointer itself (no allocation per message).
// Every send is a blocking put, none detached: SimGrid 3.32 keeps detached communications among its
// maestro's activities, which Host::turn_off walks, so with millions of them each turn_off cost
// seconds and the memory grew without bound (measured: 4.7 GB and over 14 minutes at 100,000 hosts).
constexpr uint64_t HOST_BITS = 24;  // up to 16 million hosts
constexpr uint64_t WAKE      = (uint64_t{1} << HOST_BITS) - 1;
void* request(uint64_t host, uint64_t gen) { return reinterpret_cast<void*>(((gen << HOST_BITS) | host) + 1); }
void* answer(uint64_t task, uint64_t gen) { return reinterpret_cast<void*>(((gen << 32) | task) + 1); }
uint64_t value(void* msg) { return reinterpret_cast<uintptr_t>(msg) - 1; }

struct State {
  const Instance* in = nullptr;
  std::deque<uint32_t> queue;                       // task ids; a lost task goes back to the front
  std::deque<std::pair<uint32_t, uint64_t>> waiting;  // (host, its life) of the workers waiting for work
  std::vector<int64_t> task_of;                     // per host: the task it runs, or -1
  std::vector<double> started;                      // per host: when that task was given to it
  std::vector<uint64_t> gen;                        // per host: its lives (bumped when it goes off)
  std::vector<char> has_worker;                     // per host: a worker was ever created there
  std::vector<sg4::Host*> hosts;
  std::vector<sg4::Mailbox*> boxes;
  sg4::Mailbox* master_box = nullptr;
  uint64_t done = 0, interrupted = 0;
  double makespan = 0;
};
State S;

void worker(uint32_t h)
{
  const uint64_t life = S.gen[h];
  sg4::Mailbox* mine  = S.boxes[h];
  while (true) {
    S.master_box->put(request(h, life), 0);
    uint64_t msg;
    do
      msg = value(mine->get<void>());
    while ((msg >> 32) != life);  // an answer meant for an earlier life of this host (a same-instant race)
    const auto task = static_cast<uint32_t>(msg & 0xffffffffu);
    sg4::this_actor::execute(S.in->work[task]);
    // Recorded before any simcall: a host turned off at this very instant does not undo it (rule 1).
    S.task_of[h] = -1;
    S.done++;
    S.makespan = sg4::Engine::get_clock();
    if (S.done == S.in->m) {
      sg4::Actor::kill_all();  // the bag is done: master, switcher and the other workers end here
      return;
    }
  }
}

void dispatch()
{
  while (not S.queue.empty() && not S.waiting.empty()) {
    auto [h, life] = S.waiting.front();
    S.waiting.pop_front();
    if (life != S.gen[h])
      continue;  // it went off after it asked
    const uint32_t task = S.queue.front();
    S.queue.pop_front();
    S.task_of[h] = task;
    S.started[h] = sg4::Engine::get_clock();
    try {
      S.boxes[h]->put(answer(task, life), 0);  // the worker waits in get: matched at once
    } catch (const simgrid::NetworkFailureException&) {
      // its host went off at this very instant: the switcher already put the task back
    }
  }
}

void master()
{
  while (true) {
    uint64_t msg;
    try {
      msg = value(S.master_box->get<void>());
    } catch (const simgrid::NetworkFailureException&) {
      continue;  // a request whose sender's host went off before it arrived (at one instant): void
    }
    const uint64_t h = msg & WAKE;
    if (h != WAKE) {
      const uint64_t life = msg >> HOST_BITS;
      if (life == S.gen[h] && S.hosts[h]->is_on())
        S.waiting.emplace_back(static_cast<uint32_t>(h), life);
    }
    dispatch();
  }
}

void start_worker(uint32_t h)
{
  sg4::Actor::create("worker", S.hosts[h], worker, h)->set_auto_restart(true);
  S.has_worker[h] = 1;
}

// Host h goes off now: SimGrid kills its worker; its task goes back to the head of the queue.
bool host_off(uint32_t h)
{
  S.hosts[h]->turn_off();
  S.gen[h]++;
  if (S.task_of[h] < 0)
    return false;
  S.queue.push_front(static_cast<uint32_t>(S.task_of[h]));
  if (sg4::Engine::get_clock() > S.started[h])
    S.interrupted++;  // (a task given at this very instant lost nothing, as in skylease)
  S.task_of[h] = -1;
  return true;
}

void switcher()
{
  const Instance& in = *S.in;
  // (time, host, boundary): boundary b of a host is interval b/2's on (b even) or off (b odd)
  using Ev = std::tuple<double, uint32_t, uint64_t>;
  std::priority_queue<Ev, std::vector<Ev>, std::greater<>> next;
  auto push = [&](uint32_t h, uint64_t b) {
    if (b < 2 * in.bounds[h + 1] && std::isfinite(in.iv[b]))
      next.emplace(in.iv[b], h, b);
  };
  for (uint32_t h = 0; h < in.n; h++) {
    const uint64_t b = 2 * in.bounds[h];
    push(h, S.hosts[h]->is_on() ? b + 1 : b);  // main() turned off the hosts off at 0
  }
  std::vector<std::pair<uint32_t, uint64_t>> due;
  while (not next.empty()) {
    const double t = std::get<0>(next.top());
    sg4::this_actor::sleep_until(t);
    sg4::this_actor::yield();  // rule 1: the workers whose task ends now record it first
    due.clear();
    while (not next.empty() && std::get<0>(next.top()) == t) {
      due.emplace_back(std::get<1>(next.top()), std::get<2>(next.top()));
      next.pop();
    }
    bool requeued = false;
    for (auto [h, b] : due)  // rule 2: hosts off first
      if (b % 2 == 1) {
        requeued |= host_off(h);
        push(h, b + 1);
      }
    if (requeued)  // the master hands the lost tasks to waiting workers before any host comes on
      S.master_box->put(request(WAKE, 0), 0);
    for (auto [h, b] : due)  // rule 3: then hosts on (SimGrid restarts their workers)
      if (b % 2 == 0) {
        S.hosts[h]->turn_on();
        if (not S.has_worker[h])
          start_worker(h);  // off since t = 0: its first worker
        push(h, b + 1);
      }
  }
  // Past the trace every host keeps its state; if none is on, nothing will finish the bag.
  for (auto* host : S.hosts)
    if (host->is_on())
      return;
  sg4::Actor::kill_all();
}

} // namespace

int main(int argc, char* argv[])
{
  sg4::Engine e(&argc, argv);
  if (argc != 2) {
    fprintf(stderr, "usage: %s INSTANCE\n", argv[0]);
    return 2;
  }
  // 100,000 actors: small stacks taken from the heap (a guard page each would be two memory mappings
  // per actor, past Linux's default limit of 65,530). SimGrid zeroes a stack it allocates, so its size
  // is resident: at 10,000 hosts 64 KiB stacks made 515 MiB, 16 KiB 209 MiB, same results; a worker
  // needs little (one loop, execute, put, get, the unwinding of a kill).
  sg4::Engine::set_config("contexts/stack-size:16");
  sg4::Engine::set_config("contexts/guard-size:0");
  sg4::Engine::set_config("network/model:CM02");  // no latency or bandwidth factors
  auto t0 = std::chrono::steady_clock::now();
  Instance in;
  if (not read_instance(argv[1], in)) {
    fprintf(stderr, "%s: cannot read the instance %s\n", argv[0], argv[1]);
    return 1;
  }
  if (in.n >= WAKE) {
    fprintf(stderr, "%s: at most %" PRIu64 " hosts\n", argv[0], WAKE - 1);
    return 1;
  }
  S.in = &in;
  for (uint64_t j = 0; j < in.m; j++)
    S.queue.push_back(static_cast<uint32_t>(j));
  S.task_of.assign(in.n, -1);
  S.started.assign(in.n, 0.0);
  S.gen.assign(in.n, 0);
  S.has_worker.assign(in.n, 0);

  auto* zone = sg4::create_star_zone("grid");
  const sg4::Link* link =
      zone->create_link("net", 1e15)->set_latency(0.0)->set_sharing_policy(sg4::Link::SharingPolicy::FATPIPE)->seal();
  const std::vector<sg4::LinkInRoute> route{sg4::LinkInRoute(link)};
  sg4::Host* master_host = zone->create_host("master", 1e9)->seal();
  zone->add_route(master_host->get_netpoint(), nullptr, nullptr, nullptr, route, true);
  S.hosts.reserve(in.n);
  S.boxes.reserve(in.n);
  for (uint64_t i = 0; i < in.n; i++) {
    std::string name = "h" + std::to_string(i);
    sg4::Host* host  = zone->create_host(name, in.speed[i])->seal();
    zone->add_route(host->get_netpoint(), nullptr, nullptr, nullptr, route, true);
    S.hosts.push_back(host);
    S.boxes.push_back(sg4::Mailbox::by_name(name));
  }
  zone->seal();
  S.master_box = sg4::Mailbox::by_name("master");

  // At t = 0: the hosts off (no interval, or a first interval starting later) are off before any actor
  // runs; the others' workers are created in index order, so they ask for work in that order.
  for (uint64_t i = 0; i < in.n; i++) {
    const bool on = in.bounds[i] < in.bounds[i + 1] && in.iv[2 * in.bounds[i]] <= 0.0;
    if (not on)
      S.hosts[i]->turn_off();
  }
  sg4::Actor::create("switcher", master_host, switcher);
  sg4::Actor::create("master", master_host, master);
  for (uint64_t i = 0; i < in.n; i++)
    if (S.hosts[i]->is_on())
      start_worker(static_cast<uint32_t>(i));
  auto t1 = std::chrono::steady_clock::now();
  e.run();
  auto t2 = std::chrono::steady_clock::now();
  printf("{\"hosts\": %" PRIu64 ", \"tasks\": %" PRIu64 ", \"makespan\": %.17g, \"done\": %" PRIu64
         ", \"interrupted\": %" PRIu64 ", \"load_s\": %.6f, \"run_s\": %.6f}\n",
         in.n, in.m, S.makespan, S.done, S.interrupted, std::chrono::duration<double>(t1 - t0).count(),
         std::chrono::duration<double>(t2 - t1).count());
  return 0;
}
