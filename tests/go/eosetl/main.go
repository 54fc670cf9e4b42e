// Command eosetl runs a chain of exactly-once consume-transform-produce stages with franz-go
// against one broker, the shape of franz-go's own TestTxnEtl (pkg/kgo/txn_test.go), written for
// tidelog's test suite (tests/go/test_franz_go_eos.py drives it and restarts the broker).
//
// It produces -records keyed records 0..N-1 to <prefix>-0 (idempotent, acks=all), prints
// "INPUT-DONE", then runs -stages stages: stage i reads <prefix>-i in group <prefix>-g<i>
// (read_committed) and writes each record to <prefix>-(i+1) in a transaction that also commits
// the consumed offsets (GroupTransactSession: TxnOffsetCommit + EndTxn). Each stage runs
// -consumers long-lived members plus members that quit after 0, 1 or 2 transactions (their
// last transaction aborted) and late joiners, so the groups rebalance while records flow.
//
// Lines on stdout, one fact each:
//
//	INPUT-DONE <n>
//	PROGRESS stage=<i> committed=<n>      (every second)
//	END-ERROR stage=<i> <error>           (End failed: the member starts a new session)
//	DOUBLE stage=<i> p<part>o<offset>     (an input offset committed twice)
//	STAGE-DONE stage=<i> committed=<n>
//	RESULT ok | RESULT FAIL <why>
//
// The final check (every record once in every topic, read_committed) is the test's own, with
// another client.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

type config struct {
	brokers    []string
	prefix     string
	records    int
	stages     int
	consumers  int
	balancer   string
	kip848     bool
	static     bool
	deadline   time.Duration
	txnTimeout time.Duration
	session    time.Duration
	verbose    bool
}

var out sync.Mutex

func say(format string, args ...any) {
	out.Lock()
	defer out.Unlock()
	fmt.Printf(format+"\n", args...)
}

type partOffset struct {
	part   int32
	offset int64
}

// stage is one consume-transform-produce level: its members share the accounting.
type stage struct {
	cfg       *config
	index     int
	from, to  string
	group     string
	committed atomic.Int64
	endErrors atomic.Int64
	doubles   atomic.Int64
	members   atomic.Int64
	mu        sync.Mutex
	seen      map[partOffset]struct{}
	wg        sync.WaitGroup
	done      chan struct{}
	doneOnce  sync.Once
}

func (s *stage) finished() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

func (s *stage) balancer() kgo.GroupBalancer {
	switch s.cfg.balancer {
	case "range":
		return kgo.RangeBalancer()
	case "sticky":
		return kgo.StickyBalancer()
	case "cooperative-sticky":
		return kgo.CooperativeStickyBalancer()
	}
	panic("unknown balancer " + s.cfg.balancer)
}

func (s *stage) opts(txnID, instanceID string) []kgo.Opt {
	opts := []kgo.Opt{
		kgo.SeedBrokers(s.cfg.brokers...),
		kgo.ClientID("tidelog-eosetl"),
		kgo.UnknownTopicRetries(-1),
		kgo.TransactionalID(txnID),
		kgo.TransactionTimeout(s.cfg.txnTimeout),
		kgo.SessionTimeout(s.cfg.session),
		kgo.RebalanceTimeout(s.cfg.session),
		kgo.HeartbeatInterval(time.Second),
		kgo.ConsumerGroup(s.group),
		kgo.ConsumeTopics(s.from),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.Balancers(s.balancer()),
		kgo.KeepControlRecords(),
		kgo.RetryTimeout(2 * time.Minute),
	}
	if instanceID != "" {
		opts = append(opts, kgo.InstanceID(instanceID))
	}
	if s.cfg.kip848 {
		// franz-go v1.21 speaks KIP-848 (ConsumerGroupHeartbeat) only when asked this way,
		// and only with the range or sticky balancer.
		ctx := context.WithValue(context.Background(), "opt_in_kafka_next_gen_balancer_beta", true)
		opts = append(opts, kgo.WithContext(ctx))
	}
	if s.cfg.verbose {
		opts = append(opts, kgo.WithLogger(kgo.BasicLogger(os.Stderr, kgo.LogLevelInfo, func() string {
			return time.Now().UTC().Format("15:04:05.000 ") + s.group + " "
		})))
	}
	return opts
}

// member runs one group member until the stage is done, or until it has ended txnsBeforeQuit
// transactions (then its last one is aborted and it leaves); -1 runs to the end.
func (s *stage) member(txnsBeforeQuit int) {
	defer s.wg.Done()
	n := s.members.Add(1)
	txnID := fmt.Sprintf("%s-t%d-%d", s.cfg.prefix, s.index, n)
	instanceID := ""
	if s.cfg.static {
		instanceID = fmt.Sprintf("%s-i%d-%d", s.cfg.prefix, s.index, n)
	}
	ntxns := 0
	for !s.finished() {
		sess, err := kgo.NewGroupTransactSession(s.opts(txnID, instanceID)...)
		if err != nil {
			say("RESULT FAIL stage=%d session: %v", s.index, err)
			os.Exit(2)
		}
		quit := s.run(sess, &ntxns, txnsBeforeQuit)
		sess.Close()
		leaveStatic(s.cfg, s.group, instanceID)
		if quit {
			return
		}
	}
}

// run polls and transacts on one session; true when the member is to quit, false when the
// session failed (End answered an error) and the member starts a new one.
func (s *stage) run(sess *kgo.GroupTransactSession, ntxns *int, txnsBeforeQuit int) bool {
	for {
		if s.finished() {
			return true
		}
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		fetches := sess.PollFetches(ctx)
		cancel()
		if fetches.IsClientClosed() {
			return true
		}
		if err := fetches.Err0(); err == context.DeadlineExceeded || err == context.Canceled {
			continue
		}
		if err := sess.Begin(); err != nil {
			say("END-ERROR stage=%d begin: %v", s.index, err)
			s.endErrors.Add(1)
			return false
		}
		var consumed []partOffset
		records := 0
		fetches.EachRecord(func(r *kgo.Record) {
			consumed = append(consumed, partOffset{r.Partition, r.Offset})
			if r.Attrs.IsControl() {
				return
			}
			records++
			sess.Produce(context.Background(), &kgo.Record{
				Topic: s.to, Key: append([]byte(nil), r.Key...), Value: append([]byte(nil), r.Value...),
			}, nil)
		})
		wantCommit := txnsBeforeQuit < 0 || *ntxns < txnsBeforeQuit
		committed, err := sess.End(context.Background(), kgo.TransactionEndTry(wantCommit))
		if err != nil {
			say("END-ERROR stage=%d %v", s.index, err)
			s.endErrors.Add(1)
			return false
		}
		if !committed {
			if !wantCommit {
				return true
			}
			continue
		}
		*ntxns++
		s.mu.Lock()
		for _, po := range consumed {
			if _, twice := s.seen[po]; twice {
				s.doubles.Add(1)
				say("DOUBLE stage=%d p%do%d", s.index, po.part, po.offset)
			}
			s.seen[po] = struct{}{}
		}
		s.mu.Unlock()
		if total := s.committed.Add(int64(records)); total >= int64(s.cfg.records) {
			s.doneOnce.Do(func() { close(s.done) })
		}
	}
}

// leaveStatic removes a static member after its client closed (a closing static member does
// not leave: KIP-345), so its partitions move at once rather than at the session timeout.
func leaveStatic(cfg *config, group, instanceID string) {
	if instanceID == "" {
		return
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(cfg.brokers...))
	if err != nil {
		return
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if cfg.kip848 {
		describe := kmsg.NewPtrConsumerGroupDescribeRequest()
		describe.Groups = []string{group}
		resp, err := describe.RequestWith(ctx, cl)
		if err != nil {
			return
		}
		for _, g := range resp.Groups {
			for _, m := range g.Members {
				if m.InstanceID != nil && *m.InstanceID == instanceID {
					hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
					hb.Group = group
					hb.MemberID = m.MemberID
					hb.InstanceID = m.InstanceID
					hb.MemberEpoch = -1
					_, _ = hb.RequestWith(ctx, cl)
				}
			}
		}
		return
	}
	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Group = group
	member := kmsg.NewLeaveGroupRequestMember()
	member.InstanceID = &instanceID
	leave.Members = append(leave.Members, member)
	_, _ = leave.RequestWith(ctx, cl)
}

func produceInput(cfg *config) error {
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(cfg.brokers...),
		kgo.UnknownTopicRetries(-1),
		kgo.DefaultProduceTopic(cfg.prefix+"-0"),
	)
	if err != nil {
		return err
	}
	defer cl.Close()
	records := make([]*kgo.Record, 0, cfg.records)
	for i := range cfg.records {
		records = append(records, &kgo.Record{Key: []byte(strconv.Itoa(i)), Value: []byte("v" + strconv.Itoa(i))})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return cl.ProduceSync(ctx, records...).FirstErr()
}

func main() {
	cfg := &config{}
	brokers := flag.String("brokers", "127.0.0.1:9092", "bootstrap servers, comma-separated")
	flag.StringVar(&cfg.prefix, "prefix", "etl", "topic, group and transactional id prefix")
	flag.IntVar(&cfg.records, "records", 2000, "records to carry through the chain")
	flag.IntVar(&cfg.stages, "stages", 2, "consume-transform-produce stages")
	flag.IntVar(&cfg.consumers, "consumers", 2, "long-lived members per stage")
	flag.StringVar(&cfg.balancer, "balancer", "range", "range, sticky or cooperative-sticky")
	flag.BoolVar(&cfg.kip848, "kip848", false, "consumer group protocol (KIP-848)")
	flag.BoolVar(&cfg.static, "static", false, "static membership (group.instance.id)")
	flag.DurationVar(&cfg.deadline, "deadline", 3*time.Minute, "give up after this long")
	flag.DurationVar(&cfg.txnTimeout, "txn-timeout", 60*time.Second, "transaction.timeout.ms")
	flag.DurationVar(&cfg.session, "session-timeout", 10*time.Second, "group session timeout")
	flag.BoolVar(&cfg.verbose, "v", false, "franz-go's log on stderr")
	flag.Parse()
	cfg.brokers = strings.Split(*brokers, ",")

	if err := produceInput(cfg); err != nil {
		say("RESULT FAIL input: %v", err)
		os.Exit(2)
	}
	say("INPUT-DONE %d", cfg.records)

	stages := make([]*stage, cfg.stages)
	for i := range stages {
		stages[i] = &stage{
			cfg: cfg, index: i,
			from: fmt.Sprintf("%s-%d", cfg.prefix, i), to: fmt.Sprintf("%s-%d", cfg.prefix, i+1),
			group: fmt.Sprintf("%s-g%d", cfg.prefix, i),
			seen:  make(map[partOffset]struct{}), done: make(chan struct{}),
		}
	}
	start := func(s *stage, txnsBeforeQuit int) {
		s.wg.Add(1)
		go s.member(txnsBeforeQuit)
	}
	for _, s := range stages {
		for range cfg.consumers {
			start(s, -1)
		}
		start(s, 0) // leaves after aborting its first transaction
		start(s, 2) // leaves after two transactions
	}
	say("STAGES-STARTED %d", cfg.stages)

	deadline := time.After(cfg.deadline)
	joined := time.After(3 * time.Second)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-joined: // late joiners: the groups rebalance while records flow
			for _, s := range stages {
				start(s, -1)
				start(s, 1)
			}
		case <-tick.C:
			all := true
			for _, s := range stages {
				say("PROGRESS stage=%d committed=%d", s.index, s.committed.Load())
				all = all && s.finished()
			}
			if all {
				for _, s := range stages {
					s.wg.Wait()
				}
				fail := []string{}
				for _, s := range stages {
					c := s.committed.Load()
					say("STAGE-DONE stage=%d committed=%d end_errors=%d doubles=%d", s.index, c, s.endErrors.Load(), s.doubles.Load())
					if c != int64(cfg.records) {
						fail = append(fail, fmt.Sprintf("stage %d committed %d records of %d", s.index, c, cfg.records))
					}
					if d := s.doubles.Load(); d > 0 {
						fail = append(fail, fmt.Sprintf("stage %d committed %d input offsets twice", s.index, d))
					}
				}
				if len(fail) > 0 {
					say("RESULT FAIL %s", strings.Join(fail, "; "))
					os.Exit(1)
				}
				say("RESULT ok")
				return
			}
		case <-deadline:
			parts := []string{}
			for _, s := range stages {
				parts = append(parts, fmt.Sprintf("stage %d committed %d of %d (end errors %d)", s.index, s.committed.Load(), cfg.records, s.endErrors.Load()))
			}
			say("RESULT FAIL deadline %s: %s", cfg.deadline, strings.Join(parts, "; "))
			os.Exit(1)
		}
	}
}
