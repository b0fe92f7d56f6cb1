#!/usr/bin/env python
# ruff: noqa: RUF001  (the Chinese samples are full of full-width punctuation)
"""Benchmarks of ``aiden.policy``: token-estimator accuracy and speed, planning time.

Usage::

    python benchmarks/bench_policy.py [--quick]     # tables + benchmarks/results/policy.json
    python benchmarks/bench_policy.py --fit         # refit the estimator profiles
    python benchmarks/bench_policy.py --gen-common-cjk

The real tokenizers (tiktoken o200k_base and cl100k_base) are loaded offline
from the BPE files litellm ships; a socket guard makes any download attempt
fail loudly instead of silently reaching the network.

Two disjoint corpora are generated in code: FIT (the texts the coefficients
of ``aiden.policy.tokens`` were fitted on) and VALIDATION (the texts the
accuracy table reports). They share no text: validation prose and Chinese
are different hand-written paragraphs, validation code comes from other
stdlib modules plus hand-written JavaScript/Go/SQL/shell, validation JSON
uses other payload shapes and seeds, validation mixed text is built from the
validation pieces. Set ``AIDEN_REAL_DATA`` to ``../shared/data`` to add a row
measured on real agent sessions (SWE-agent trajectories).

This machine is shared and noisy: speed is reported as medians over repeats
and as ratios measured side by side in one run.
"""

from __future__ import annotations

import argparse
import base64
import functools
import hashlib
import importlib
import importlib.util
import inspect
import json
import os
import platform
import random
import re
import socket
import statistics
import string
import struct
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import msgspec

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # run from a checkout without installing

from aiden.config import Config  # noqa: E402
from aiden.events import SessionEvent  # noqa: E402
from aiden.policy.cutpoints import CompactionPlan, plan_compaction  # noqa: E402
from aiden.policy.tokens import (  # noqa: E402
    CL100K,
    DEFAULT_PROFILE,
    O200K,
    TokenProfile,
    estimate_tokens,
    event_tokens,
    text_features,
)

KINDS = ("English prose", "code", "JSON tool output", "Chinese", "mixed", "random-looking")


# --- offline tokenizers ----------------------------------------------------------


@contextmanager
def no_network() -> Iterator[None]:
    """Make every outgoing connection raise, so a cache miss cannot download."""
    real_connect = socket.socket.connect

    def refuse(self: socket.socket, address: Any) -> None:
        raise RuntimeError(f"network access attempted: {address!r}")

    socket.socket.connect = refuse  # type: ignore[method-assign, assignment]
    try:
        yield
    finally:
        socket.socket.connect = real_connect  # type: ignore[method-assign]


def load_encodings() -> dict[str, Any]:
    spec = importlib.util.find_spec("litellm")  # locate only: litellm is never imported
    if spec is None or spec.origin is None:
        raise SystemExit("litellm is not installed: no offline tiktoken files")
    cache = Path(spec.origin).parent / "litellm_core_utils" / "tokenizers"
    os.environ["TIKTOKEN_CACHE_DIR"] = str(cache)
    with no_network():
        import tiktoken

        encodings = {name: tiktoken.get_encoding(f"{name}_base") for name in ("o200k", "cl100k")}
    assert "litellm" not in sys.modules
    return encodings


def true_count(enc: Any, text: str) -> int:
    return len(enc.encode_ordinary(text))


# --- the seed's estimator (CJK 1 token/char, other text chars/4) -------------------

_SEED_CJK = re.compile(r"[\u2e80-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef]")


def seed_estimate(text: str) -> int:
    cjk = len(_SEED_CJK.findall(text))
    return cjk + (len(text) - cjk + 3) // 4


# --- corpus pieces -------------------------------------------------------------------

ZH_FIT = [
    (
        "今天早上我六点就起床了，因为要赶早班的高铁去上海开会。车站里人很多，大家都拿着行李排队进站"
        "。我在候车室买了一杯热豆浆和两个包子，一边吃一边看手机上的新闻。上车以后，我把电脑打开，继"
        "续修改昨天没有完成的报告。窗外的田野一片金黄，农民们正在收割稻谷，看起来今年又是一个丰收年"
        "。"
    ),
    (
        "这个项目的主要目标是提高系统的稳定性和可维护性。过去一年里，我们遇到了很多由于配置错误导致"
        "的线上故障，每次排查都要花费大量的时间。因此，团队决定引入统一的配置管理平台，并且为所有关"
        "键服务增加自动化测试和监控告警。我们希望在下个季度结束之前，把故障的平均恢复时间缩短一半。"
    ),
    (
        "我的奶奶住在一个安静的小镇上，那里有一条清澈的小河从镇子中间穿过。每到夏天，孩子们都喜欢在"
        "河边捉鱼、游泳，大人们则坐在树荫下聊天、下棋。奶奶总是说，城市里的生活虽然方便，但是太吵闹"
        "了，她更喜欢这里的慢节奏。每年春节，我们全家都会回去看她，一起包饺子、放鞭炮，热热闹闹地过"
        "年。"
    ),
    (
        "人工智能技术的快速发展正在深刻地改变各行各业。在医疗领域，机器学习模型可以帮助医生更早地发"
        "现疾病；在交通领域，自动驾驶汽车正在逐步走向现实；在教育领域，个性化的学习系统能够根据每个"
        "学生的特点推荐合适的内容。然而，这些技术也带来了隐私保护、算法偏见和就业结构变化等新的挑战"
        "，需要社会各界共同面对。"
    ),
    (
        "请问你们的退货政策是怎样的？我上周在网上买了一件外套，收到以后发现尺码偏小，穿起来很不舒服"
        "。商品的吊牌还在，包装也没有拆坏。我想换一件大一号的，如果没有库存的话，能不能直接退款？另"
        "外，运费是由我来承担还是由商家承担？麻烦尽快回复我，谢谢！"
    ),
    (
        "学习一门新的编程语言，最好的方法就是动手写代码。刚开始的时候，可以先从简单的小程序做起，比"
        "如计算器、待办事项清单或者猜数字游戏。遇到不懂的地方，不要急着去搜索答案，先试着自己思考和"
        "调试。等基础打牢以后，再去阅读优秀的开源项目，学习别人是如何组织代码、编写测试和处理错误的"
        "。"
    ),
    (
        "昨天晚上下了一场大雨，气温一下子降了将近十度。早上出门的时候，路面上还有很多积水，公交车开"
        "得特别慢。我到公司的时候已经迟到了二十分钟，幸好今天上午没有安排重要的会议。同事们都在讨论"
        "这场雨，有人说这是今年入秋以来最大的一场降雨，天气预报说接下来几天还会继续降温。"
    ),
    (
        "这家餐厅的招牌菜是红烧肉和清蒸鲈鱼。红烧肉肥而不腻，入口即化，配上一碗白米饭简直是人间美味"
        "。清蒸鲈鱼的做法很简单，只用了葱、姜和少量的酱油，但是鱼肉非常鲜嫩，完全保留了食材本身的味"
        "道。服务员的态度也很好，上菜速度很快。唯一的缺点是周末人太多，通常要排队等一个小时左右。"
    ),
]

ZH_VALIDATION = [
    (
        "经过三个月的准备，我们终于完成了新版本的发布。这次更新主要包括三个方面：第一，重新设计了用"
        "户界面，让操作更加简洁直观；第二，优化了数据库查询，页面加载速度提升了百分之四十；第三，修"
        "复了用户反馈的五十多个问题。感谢每一位参与测试的朋友，你们的意见对我们非常重要。"
    ),
    (
        "周末我和几个朋友去爬山。山不算太高，但是路很陡，走到一半的时候大家都累得气喘吁吁。山顶上风"
        "景非常美，可以看到远处连绵起伏的群山和山脚下的村庄。我们在山顶吃了带来的午饭，拍了很多照片"
        "，休息了一会儿才下山。回到家以后，虽然腿很酸，但是心情特别愉快。"
    ),
    (
        "关于明天会议的安排，我想再跟大家确认一下。会议时间是上午九点半，地点在三楼的大会议室。主要"
        "议题有两个：一是讨论下半年的市场推广计划，二是评审新产品的设计方案。请各部门负责人提前准备"
        "好相关材料，并在今天下班之前发到我的邮箱。如果有特殊情况不能参加，请提前告诉我。"
    ),
    (
        "读书是一种很好的习惯。通过阅读，我们可以了解不同的文化和历史，学习前人的经验和智慧，也可以"
        "在忙碌的生活中找到片刻的宁静。我每天晚上睡觉之前都会读半个小时的书，有时候是小说，有时候是"
        "历史或者科普类的书籍。坚持了几年以后，我发现自己的思维方式和表达能力都有了明显的进步。"
    ),
    (
        "系统在凌晨两点左右出现了大量的超时错误，值班同事收到告警后立即开始排查。初步分析发现，是因"
        "为一个定时任务在执行时锁住了数据库的核心表，导致其他请求长时间等待。我们临时停止了这个任务"
        "，服务在十分钟内恢复正常。接下来需要重新设计任务的执行逻辑，避免类似的问题再次发生。"
    ),
    (
        "中国的传统节日有很多，比如春节、元宵节、清明节、端午节和中秋节。每个节日都有自己独特的习俗"
        "和美食。端午节的时候，人们会吃粽子、赛龙舟，纪念古代的爱国诗人屈原；中秋节的时候，家人们团"
        "聚在一起，一边赏月一边吃月饼，表达对美好生活的向往和对远方亲人的思念。"
    ),
    (
        "你好，我想咨询一下关于办理护照的事情。我需要准备哪些材料？是不是必须本人到现场办理？听说现"
        "在可以在网上预约，请问具体的流程是什么？另外，办理下来一般需要多长时间，费用是多少？因为我"
        "下个月要出国旅游，时间比较紧张，所以想尽快办好。非常感谢您的帮助。"
    ),
    (
        "随着城市化进程的加快，越来越多的年轻人离开家乡，到大城市里工作和生活。大城市虽然提供了更多"
        "的机会和更高的收入，但是房价高、通勤时间长、生活压力大也是不争的事实。近几年，一些年轻人开"
        "始选择回到家乡或者去中小城市发展，在那里他们可以用更低的成本过上更舒适的生活。"
    ),
]

PROSE_FIT = [
    (
        "The train was forty minutes late, which meant I missed the connection in Leeds and had to "
        "wait for the next one in a drafty waiting room that smelled of burnt coffee. A woman next "
        "to me was knitting something enormous and blue. When I asked what it was, she laughed and "
        "said she had no idea yet; she only knew it would be warm. By the time my train arrived, "
        "she had finished another six rows and I had decided I liked her very much."
    ),
    (
        "Dear Mr. Patel, thank you for your letter of the 12th. I'm sorry to hear that the "
        "replacement part still has not arrived. I have checked with our warehouse and it appears "
        "the order was sent to your old address. We have now corrected this and dispatched a new "
        "part by express courier, which should reach you within two working days. Please accept "
        "our apologies for the inconvenience, and do not hesitate to contact me directly if "
        "anything else goes wrong."
    ),
    (
        "Scientists studying a remote lake in northern Canada have discovered a species of "
        "freshwater shrimp that appears to survive for months without oxygen. The researchers "
        "believe the animals slow their metabolism almost to a standstill when the lake freezes "
        "over each winter. The finding could help explain how life persists in some of the "
        "harshest environments on the planet, and may even inform the search for life on other "
        "worlds."
    ),
    (
        "To replace the filter, first turn off the water supply and open the tap to release any "
        "pressure in the line. Unscrew the housing by turning it counter-clockwise; you may need "
        "the plastic wrench that came with the unit. Remove the old cartridge, rinse the housing "
        "with clean water, and insert the new cartridge with the arrow pointing in the direction "
        "of the flow. Tighten the housing by hand, turn the water back on, and check for leaks."
    ),
    (
        "I think the main reason the project slipped is that we never agreed on what done meant. "
        "The designers thought they were delivering a prototype, the engineers thought they were "
        "building the final product, and the client thought both things would happen at the same "
        "time. Next time, let's write the acceptance criteria down in the first week and get "
        "everyone to sign them, even if it feels bureaucratic."
    ),
    (
        "She had always been good at remembering faces but terrible with names, which made parties "
        "a special kind of torture. Tonight was no different. A tall man in a green sweater waved "
        "at her from across the room with obvious delight, and she waved back with exactly the "
        "same enthusiasm while searching her memory in a quiet panic. Was it Tom? Tim? Someone "
        "from the old office? He was getting closer, and he was carrying two drinks."
    ),
    (
        "Interest rates are expected to remain unchanged at next month's meeting, according to "
        "most economists surveyed this week. Inflation has cooled faster than many predicted, but "
        "the labour market remains tight, and policymakers have signalled that they would rather "
        "wait for more data than risk cutting too early. Markets, however, are already pricing in "
        "at least two reductions before the end of the year."
    ),
    (
        "Thanks for the quick turnaround on this! I tried the new build and the login issue is "
        "gone, but I noticed the settings page now takes a few seconds to load. It's not a blocker "
        "for the release, just something to look at when you get a chance. Also, could you update "
        "the changelog? The last entry still mentions the old version number."
    ),
]

PROSE_VALIDATION = [
    (
        "When the storm finally passed, the village looked smaller than I remembered. The bakery "
        "on the corner had lost its awning, and someone had already swept the broken glass into a "
        "neat pile by the door. Mrs. Alvarez was standing in the middle of the street with a "
        "thermos of coffee, offering cups to anyone who walked by. Nobody said much. We drank the "
        "coffee, nodded at each other, and then went home to see what the wind had taken from us."
    ),
    (
        "Hi Dana, thanks for sending the draft over so quickly. I read it on the train this "
        "morning and I think the structure works, but the second section feels rushed. Could we "
        "move the customer interviews before the pricing discussion? That way the numbers will "
        "make more sense to people who haven't been following the project. Also, the chart on page "
        "four uses last quarter's figures; I've attached the updated spreadsheet. Let's talk on "
        "Thursday if you have time."
    ),
    (
        "The city council voted on Tuesday to expand the bike-lane network by roughly forty "
        "kilometres over the next three years. Supporters argued that the plan would reduce "
        "traffic and make commuting safer, while several shop owners worried that losing parking "
        "spaces would hurt their business. The mayor said the first phase, which connects the "
        "university to the central station, should be finished before the end of next summer."
    ),
    (
        "Caching is one of those ideas that sounds simple until you have to decide when the cached "
        "value is no longer true. A cache that never expires will eventually serve stale data; a "
        "cache that expires too often provides no benefit at all. Most production systems settle "
        "on a compromise: short time-to-live values for data that changes frequently, explicit "
        "invalidation for data that must be correct, and careful monitoring of the hit rate so "
        "that regressions are noticed early."
    ),
    (
        "My grandfather kept a notebook in the pocket of his work jacket for more than fifty "
        "years. He wrote down the weather, the price of diesel, the names of the men he worked "
        "with, and, occasionally, a line of poetry he had heard on the radio. After he died, we "
        "found thirty-one of these notebooks in a shoebox under his bed. Reading them felt like "
        "listening to him talk again, slowly and without any hurry to reach the point."
    ),
    (
        "Before you submit the form, please check that your name matches the one printed on your "
        "passport, including any middle names. Applications with mismatched details are usually "
        "returned without being processed, and the fee is not refunded. If you are applying on "
        "behalf of a child under sixteen, both parents must sign the consent section. Processing "
        "normally takes six to eight weeks, although it can take longer during the summer months."
    ),
    (
        "The experiment did not go the way we expected. Our hypothesis was that the new fertilizer "
        "would increase the yield of every variety we tested, but in practice only two of the five "
        "varieties responded at all, and one of them actually produced fewer seeds than the "
        "control group. We suspect the soil in the northern plots was already rich in nitrogen, "
        "which would explain why the extra nutrients made little difference there."
    ),
    (
        "Honestly, I didn't expect to enjoy the conference as much as I did. The talks were "
        "uneven, as they always are, but the hallway conversations were fantastic. I met a team "
        "from Lisbon who had solved almost exactly the problem we've been struggling with for "
        "months, and they were happy to share their notes. I'm going to write up what I learned "
        "and circulate it next week, so keep an eye on your inbox."
    ),
]

CODE_VALIDATION_EXTRA = [
    """import { useEffect, useState } from "react";

export function useDebouncedValue<T>(value: T, delayMs = 300): T {
  const [debounced, setDebounced] = useState(value);
  useEffect(() => {
    const handle = setTimeout(() => setDebounced(value), delayMs);
    return () => clearTimeout(handle);
  }, [value, delayMs]);
  return debounced;
}

export async function fetchUsers(page: number): Promise<User[]> {
  const response = await fetch(`/api/users?page=${page}&per_page=50`);
  if (!response.ok) {
    throw new Error(`request failed with status ${response.status}`);
  }
  const body = (await response.json()) as { users: User[] };
  return body.users.filter((user) => user.active);
}
""",
    """package store

import (
\t"context"
\t"database/sql"
\t"errors"
\t"fmt"
\t"time"
)

var ErrNotFound = errors.New("store: record not found")

type Order struct {
\tID        int64
\tCustomer  string
\tTotal     float64
\tCreatedAt time.Time
}

func (s *Store) GetOrder(ctx context.Context, id int64) (*Order, error) {
\tconst query = `SELECT id, customer, total, created_at FROM orders WHERE id = $1`
\trow := s.db.QueryRowContext(ctx, query, id)
\tvar o Order
\tif err := row.Scan(&o.ID, &o.Customer, &o.Total, &o.CreatedAt); err != nil {
\t\tif errors.Is(err, sql.ErrNoRows) {
\t\t\treturn nil, ErrNotFound
\t\t}
\t\treturn nil, fmt.Errorf("get order %d: %w", id, err)
\t}
\treturn &o, nil
}
""",
    """-- monthly revenue per region, excluding refunded orders
WITH paid AS (
    SELECT o.id, o.region_id, o.total, date_trunc('month', o.created_at) AS month
    FROM orders o
    LEFT JOIN refunds r ON r.order_id = o.id
    WHERE r.id IS NULL AND o.status = 'paid'
)
SELECT reg.name, p.month, SUM(p.total) AS revenue, COUNT(*) AS orders
FROM paid p
JOIN regions reg ON reg.id = p.region_id
GROUP BY reg.name, p.month
HAVING SUM(p.total) > 1000
ORDER BY p.month DESC, revenue DESC
LIMIT 100;
""",
    """#!/usr/bin/env bash
set -euo pipefail

BACKUP_DIR="/var/backups/postgres/$(date +%Y-%m-%d)"
mkdir -p "$BACKUP_DIR"

for db in $(psql -At -c "SELECT datname FROM pg_database WHERE NOT datistemplate"); do
  echo "dumping $db ..."
  pg_dump --format=custom --file="$BACKUP_DIR/$db.dump" "$db"
done

find /var/backups/postgres -maxdepth 1 -type d -mtime +14 -exec rm -rf {} +
echo "done: $(du -sh "$BACKUP_DIR" | cut -f1)"
""",
]

FIT_CODE_MODULES = ("argparse", "json.decoder", "email.message", "logging", "string", "shlex")
VALIDATION_CODE_MODULES = (
    "collections",
    "textwrap",
    "dataclasses",
    "pathlib",
    "fractions",
    "heapq",
)

MIXED_TERMS = (
    "Python 3.11",
    "`pytest -x`",
    "Docker",
    "Kubernetes",
    "API",
    "JSON",
    "HTTP 500",
    "README.md",
    "git rebase",
    "PostgreSQL",
    "Redis",
    "timeout=30",
    "v2.4.1",
    "CI/CD",
    "GitHub Actions",
)


def _module_source(name: str) -> str:
    return inspect.getsource(importlib.import_module(name))


def _slices(text: str, size: int, limit: int) -> list[str]:
    return [text[i : i + size] for i in range(0, min(len(text), limit), size) if text[i : i + size]]


def _fit_prose() -> list[str]:
    topics: dict[str, str]
    try:
        topics = dict(importlib.import_module("pydoc_data.topics").topics)
    except ImportError:  # some distributions strip pydoc_data: fall back to docstrings
        topics = {n: inspect.getdoc(importlib.import_module(n)) or "" for n in FIT_CODE_MODULES}
    texts = [topics[key] for key in sorted(topics)[::4] if len(topics[key]) > 1500]
    return (
        PROSE_FIT
        + ["\n\n".join(PROSE_FIT[i : i + 4]) for i in (0, 4)]
        + [t[:5000] for t in texts[:6]]
    )


def _fit_json(seed: int, count: int) -> list[str]:
    r = random.Random(seed)
    words = [
        "alpha",
        "beta",
        "gamma",
        "delta",
        "error",
        "warning",
        "info",
        "debug",
        "request",
        "response",
        "user",
        "admin",
        "ok",
    ]
    out = []
    for i in range(count):
        kind = i % 4
        data: Any
        if kind == 0:
            data = [
                {
                    "id": r.randint(1, 10**6),
                    "name": f"file_{j}.py",
                    "path": f"/home/user/project/src/m{j}/f{r.randint(1, 99)}.py",
                    "size": r.randint(10, 99999),
                    "modified": f"2024-03-{r.randint(1, 28):02d}T12:{r.randint(0, 59):02d}:00Z",
                    "is_dir": r.random() < 0.2,
                }
                for j in range(r.randint(5, 40))
            ]
        elif kind == 1:
            data = {
                "results": [
                    {
                        "title": " ".join(r.choice(words) for _ in range(r.randint(2, 8))),
                        "url": f"https://example.com/{r.choice(words)}/{r.randint(1, 9999)}",
                        "score": round(r.random(), 4),
                    }
                    for _ in range(r.randint(3, 25))
                ],
                "total": r.randint(1, 1000),
            }
        elif kind == 2:
            rows = [
                [r.randint(0, 1000), r.random(), r.choice(words)] for _ in range(r.randint(3, 30))
            ]
            data = {"status": r.choice(words), "data": {"items": rows}, "meta": {"page": 1}}
        else:
            data = [
                {
                    "level": r.choice(words),
                    "ts": r.randint(1_700_000_000, 1_800_000_000),
                    "msg": " ".join(r.choice(words) for _ in range(r.randint(3, 12))),
                    "ctx": {"pid": r.randint(1, 65535), "thread": f"worker-{r.randint(1, 16)}"},
                }
                for _ in range(r.randint(5, 30))
            ]
        out.append(json.dumps(data, indent=r.choice([None, 2])))
    return out


def _validation_json(seed: int, count: int) -> list[str]:
    r = random.Random(seed)
    names = ["张伟", "王芳", "Alice", "Bob", "Carol", "Dmitri", "José", "李娜"]
    out = []
    for i in range(count):
        kind = i % 5
        data: Any
        if kind == 0:  # a GitHub issues listing
            data = [
                {
                    "number": r.randint(1, 5000),
                    "title": r.choice(
                        ["Fix crash on startup", "Add retry to HTTP client", "Docs: typo in README"]
                    ),
                    "user": {"login": r.choice(names), "id": r.randint(1, 10**7)},
                    "labels": [
                        {
                            "name": r.choice(["bug", "enhancement"]),
                            "color": f"{r.getrandbits(24):06x}",
                        }
                    ],
                    "state": r.choice(["open", "closed"]),
                    "created_at": (
                        f"2024-{r.randint(1, 12):02d}-{r.randint(1, 28):02d}"
                        f"T{r.randint(0, 23):02d}:00:00Z"
                    ),
                    "node_id": hashlib.sha1(str(r.random()).encode()).hexdigest()[:20],
                }
                for _ in range(r.randint(3, 12))
            ]
        elif kind == 1:  # kubectl get pods -o json
            data = {
                "kind": "PodList",
                "items": [
                    {
                        "metadata": {
                            "name": f"api-{uuid.UUID(int=r.getrandbits(128)).hex[:10]}",
                            "uid": str(uuid.UUID(int=r.getrandbits(128))),
                            "namespace": "default",
                        },
                        "status": {
                            "phase": r.choice(["Running", "Pending"]),
                            "restartCount": r.randint(0, 5),
                            "podIP": ".".join(["10", *(str(r.randint(0, 255)) for _ in "123")]),
                        },
                    }
                    for _ in range(r.randint(3, 10))
                ],
            }
        elif kind == 2:  # a SQL tool result
            data = {
                "query": "SELECT id, total, customer, day FROM orders WHERE total > 100",
                "rows": [
                    [
                        r.randint(1, 99999),
                        round(r.uniform(100, 9999), 2),
                        r.choice(names),
                        f"2023-{r.randint(1, 12):02d}-{r.randint(1, 28):02d}",
                    ]
                    for _ in range(r.randint(5, 30))
                ],
                "elapsed_ms": r.randint(1, 900),
            }
        elif kind == 3:  # a weather API
            data = {
                "location": r.choice(["北京", "上海", "Berlin", "San Francisco"]),
                "forecast": [
                    {
                        "day": d,
                        "temp_c": round(r.uniform(-5, 35), 1),
                        "summary": r.choice(["晴", "多云", "Light rain", "Sunny"]),
                        "wind_kph": r.randint(0, 60),
                    }
                    for d in range(7)
                ],
            }
        else:  # package metadata
            data = {
                "name": r.choice(["requests", "numpy", "fastapi"]),
                "version": f"{r.randint(0, 3)}.{r.randint(0, 30)}.{r.randint(0, 9)}",
                "requires_dist": [
                    f"dep{j}>={r.randint(0, 5)}.{r.randint(0, 9)}" for j in range(r.randint(2, 8))
                ],
                "sha256": hashlib.sha256(str(r.random()).encode()).hexdigest(),
                "summary": "HTTP library for humans, with connection pooling and retries.",
            }
        out.append(json.dumps(data, indent=r.choice([None, 2]), ensure_ascii=r.random() < 0.5))
    return out


def _mixed(zh: Sequence[str], modules: Sequence[str], seed: int, count: int) -> list[str]:
    r = random.Random(seed)
    sentences = [s + "。" for p in zh for s in p.split("。") if s]
    sources = [_module_source(m).splitlines() for m in modules]
    out = []
    for _ in range(count):
        parts = []
        for _ in range(r.randint(3, 7)):
            roll = r.random()
            if roll < 0.5:
                s = r.choice(sentences)
                cut = r.randint(0, len(s) - 1)
                parts.append(s[:cut] + " " + r.choice(MIXED_TERMS) + " " + s[cut:])
            elif roll < 0.75:
                lines = r.choice(sources)
                i = r.randint(0, len(lines) - 12)
                parts.append("```python\n" + "\n".join(lines[i : i + r.randint(4, 12)]) + "\n```")
            else:
                parts.append(
                    f"错误信息：`{r.choice(['Value', 'Key', 'Connection'])}Error: "
                    f"{r.choice(['invalid literal', 'missing key id', 'timed out after 30s'])}` "
                    f"出现在 /srv/app/{r.choice(['main', 'worker'])}.py 第 {r.randint(1, 900)} 行"
                )
        out.append("\n\n".join(parts))
    return out


def _pairs(paragraphs: Sequence[str]) -> list[str]:
    return list(paragraphs) + ["".join(paragraphs[i : i + 2]) for i in range(0, len(paragraphs), 2)]


def random_looking(seed: int, prose: Sequence[str]) -> list[str]:
    """Blobs a coding agent's tools print: base64 (of random bytes, of ``prose``, of binary records full of
    zero bytes), hex, JWTs, UUIDs, hashes, keys."""
    r = random.Random(seed)
    alnum = string.ascii_letters + string.digits

    def b64url(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).decode().rstrip("=")

    def jwt() -> str:
        claims = {"sub": str(r.randint(10**6, 10**7)), "iat": r.randint(1_600_000_000, 1_700_000_000)}
        header = b64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
        return f"{header}.{b64url(json.dumps(claims).encode())}.{b64url(r.randbytes(32))}"

    def records(n: int) -> bytes:
        """Little-endian integers of mixed sizes, mostly small: what binaries and data files hold."""
        return b"".join(struct.pack("<Q", r.randrange(1 << r.choice((4, 8, 16, 32, 64)))) for _ in range(n))

    return [
        *(base64.b64encode(r.randbytes(n)).decode() for n in (24, 90, 400, 1500)),
        base64.encodebytes(r.randbytes(1200)).decode(),  # 76-column lines, as `base64` prints
        base64.b64encode(prose[0].encode()).decode(),
        base64.b64encode(records(150)).decode(),
        base64.encodebytes(records(100)).decode(),
        r.randbytes(400).hex(),
        "\n".join(str(uuid.UUID(int=r.getrandbits(128))) for _ in range(20)),
        "\n".join(f"{r.randbytes(32).hex()}  dist/pkg-{i}.tar.gz" for i in range(10)),
        jwt(),
        "Authorization: Bearer " + jwt(),
        *(b64url(r.randbytes(n)) for n in (16, 32)),
        "\n".join(f"TOKEN_{i}=" + "".join(r.choice(alnum) for _ in range(40)) for i in range(6)),
    ]


def fit_corpus() -> dict[str, list[str]]:
    code = [s for m in FIT_CODE_MODULES for s in _slices(_module_source(m), 5000, 20000)]
    return {
        "English prose": _fit_prose(),
        "code": code,
        "JSON tool output": _fit_json(1, 24),
        "Chinese": _pairs(ZH_FIT),
        "mixed": _mixed(ZH_FIT, FIT_CODE_MODULES[:2], 1, 12),
    }


def validation_corpus() -> dict[str, list[str]]:
    code = [s for m in VALIDATION_CODE_MODULES for s in _slices(_module_source(m), 5000, 10000)]
    return {
        "English prose": PROSE_VALIDATION
        + ["\n\n".join(PROSE_VALIDATION[i : i + 3]) for i in (0, 3)],
        "code": code + CODE_VALIDATION_EXTRA,
        "JSON tool output": _validation_json(3, 20),
        "Chinese": _pairs(ZH_VALIDATION),
        "mixed": _mixed(ZH_VALIDATION, VALIDATION_CODE_MODULES[:2], 9, 12),
        "random-looking": random_looking(9, PROSE_VALIDATION),
    }


def real_data_corpus() -> dict[str, list[str]]:
    """Message texts of the SWE-agent trajectories under ``$AIDEN_REAL_DATA`` (empty if unset)."""
    root = os.environ.get("AIDEN_REAL_DATA")
    if not root:
        return {}
    folder = Path(root) / "swe-agent"
    if not folder.is_dir():
        print(f"note: {folder} not found; skipping the real-data row", file=sys.stderr)
        return {}
    texts: list[str] = []
    for path in sorted(folder.glob("*.traj")):
        for message in json.loads(path.read_text(encoding="utf-8")).get("history", []):
            content = message.get("content")
            if isinstance(content, list):
                content = "".join(
                    part.get("text", "") for part in content if isinstance(part, dict)
                )
            if isinstance(content, str) and content:
                texts.append(content)
    return {"SWE-agent messages (real)": texts}


# --- accuracy ----------------------------------------------------------------------


def accuracy(corpus: dict[str, list[str]], encodings: dict[str, Any]) -> list[dict[str, Any]]:
    estimators: dict[str, Callable[[str], int]] = {
        "seed": seed_estimate,
        "ours_o200k": lambda t: estimate_tokens(t, O200K),
        "ours_cl100k": lambda t: estimate_tokens(t, CL100K),
        "ours_default": estimate_tokens,
    }
    rows = []
    for kind, texts in corpus.items():
        truth = {name: [true_count(enc, t) for t in texts] for name, enc in encodings.items()}
        row: dict[str, Any] = {"kind": kind, "samples": len(texts), "chars": sum(map(len, texts))}
        for est_name, est in estimators.items():
            values = [est(t) for t in texts]
            for enc_name, counts in truth.items():
                ratios = [v / c for v, c in zip(values, counts, strict=True) if c]
                row[f"{est_name}/{enc_name}"] = {
                    "ratio": sum(values) / sum(counts),
                    "min": min(ratios),
                    "max": max(ratios),
                }
        rows.append(row)
    return rows


def _cell(entry: dict[str, float]) -> str:
    return f"{entry['ratio']:.2f} ({entry['min']:.2f}-{entry['max']:.2f})"


def accuracy_table(rows: list[dict[str, Any]]) -> str:
    lines = [
        (
            "| text kind | n | seed / o200k | seed / "
            "cl100k | ours / o200k | ours / cl100k | default "
            "/ o200k |"
        ),
        "|---|---:|---|---|---|---|---|",
    ]
    for row in rows:
        lines.append(
            f"| {row['kind']} | {row['samples']}"
            f" | {_cell(row['seed/o200k'])} | {_cell(row['seed/cl100k'])}"
            f" | {_cell(row['ours_o200k/o200k'])} | {_cell(row['ours_cl100k/cl100k'])}"
            f" | {_cell(row['ours_default/o200k'])} |"
        )
    return "\n".join(lines)


# --- speed -------------------------------------------------------------------------------


def _time_per_call(fn: Callable[[str], object], texts: Sequence[str], repeats: int) -> float:
    """Median over ``repeats`` of the mean seconds per call over all ``texts``."""
    loops = max(1, 2000 // max(1, len(texts)))
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(loops):
            for text in texts:
                fn(text)
        samples.append((time.perf_counter() - start) / (loops * len(texts)))
    return statistics.median(samples)


def speed(
    corpus: dict[str, list[str]], encodings: dict[str, Any], repeats: int
) -> list[dict[str, Any]]:
    short = [
        "ok",
        "Sounds good, thanks!",
        "Run the tests again please.",
        "File not found: config.yaml",
        "好的，谢谢！",
        "Done. 3 files changed, 42 insertions(+), 7 deletions(-)",
    ]
    rows = []
    for kind, texts in [*corpus.items(), ("short messages", short)]:
        ours = _time_per_call(estimate_tokens, texts, repeats)
        seed = _time_per_call(seed_estimate, texts, repeats)
        row: dict[str, Any] = {
            "kind": kind,
            "mean_chars": sum(map(len, texts)) / len(texts),
            "ours_per_s": 1 / ours,
            "seed_per_s": 1 / seed,
        }
        for name, enc in encodings.items():
            t = _time_per_call(enc.encode_ordinary, texts, repeats)
            row[f"{name}_per_s"] = 1 / t
            row[f"speedup_vs_{name}"] = t / ours
        rows.append(row)
    return rows


def speed_table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| text kind | mean chars | ours est/s | seed est/s | o200k enc/s | cl100k enc/s |"
        " ours vs o200k | ours vs cl100k |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        lines.append(
            f"| {row['kind']} | {row['mean_chars']:.0f}"
            f" | {row['ours_per_s']:,.0f} | {row['seed_per_s']:,.0f}"
            f" | {row['o200k_per_s']:,.0f} | {row['cl100k_per_s']:,.0f}"
            f" | {row['speedup_vs_o200k']:.1f}x | {row['speedup_vs_cl100k']:.1f}x |"
        )
    return "\n".join(lines)


# --- planning time ---------------------------------------------------------------------


def synthetic_window(count: int, seed: int = 7) -> list[SessionEvent]:
    """A hot window of ``count`` events shaped like an agent session."""
    r = random.Random(seed)
    words = PROSE_VALIDATION[0].split()
    events: list[SessionEvent] = []
    seq = 0

    def add(**fields: Any) -> None:
        nonlocal seq
        seq += 1
        events.append(SessionEvent(seq=seq, **fields))

    call = 0
    while len(events) < count:
        add(type="user_input", role="user", content=" ".join(r.choices(words, k=r.randint(5, 40))))
        for _ in range(r.randint(0, 4)):
            call += 1
            add(
                type="tool_call",
                role="assistant",
                tool_name="read_file",
                tool_call_id=f"c{call}",
                tool_args=json.dumps({"path": f"src/mod{call}.py"}),
            )
            add(
                type="tool_result",
                role="tool",
                tool_call_id=f"c{call}",
                content=" ".join(r.choices(words, k=r.randint(20, 400))),
            )
        if r.random() < 0.1:
            add(type="system_event", role="system", content="context window nearly full")
        add(
            type="assistant_output",
            role="assistant",
            content=" ".join(r.choices(words, k=r.randint(10, 120))),
            pinned="decision" if r.random() < 0.01 else None,
        )
    return events[:count]


def planning(sizes: Sequence[int], repeats: int) -> list[dict[str, Any]]:
    config = Config()
    rows = []
    for size in sizes:
        events = synthetic_window(size)
        counts = event_tokens(events)
        reps = repeats if size <= 10_000 else max(1, repeats // 2)
        plan_only, with_estimate = [], []
        for _ in range(reps):
            start = time.perf_counter()
            plan = plan_compaction(events, config, token_counts=counts, target_tokens=16_000)
            plan_only.append(time.perf_counter() - start)
            start = time.perf_counter()
            plan_compaction(events, config, target_tokens=16_000)
            with_estimate.append(time.perf_counter() - start)
        assert isinstance(plan, CompactionPlan)
        p, e = statistics.median(plan_only), statistics.median(with_estimate)
        rows.append(
            {
                "events": size,
                "plan_ms": p * 1e3,
                "plan_us_per_event": p * 1e6 / size,
                "plan_with_estimate_ms": e * 1e3,
                "with_estimate_us_per_event": e * 1e6 / size,
                "compacted": len(plan.compacted),
                "retained": len(plan.retained),
            }
        )
    return rows


def planning_table(rows: list[dict[str, Any]]) -> str:
    lines = [
        (
            "| events | plan (counts given) | per event "
            "| plan + estimate | per event | compacted | "
            "retained |"
        ),
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        lines.append(
            f"| {row['events']:,} | {row['plan_ms']:.2f} ms | {row['plan_us_per_event']:.2f} µs"
            f" | {row['plan_with_estimate_ms']:.2f} ms | {row['with_estimate_us_per_event']:.2f} µs"
            f" | {row['compacted']:,} | {row['retained']:,} |"
        )
    return "\n".join(lines)


# --- fitting -------------------------------------------------------------------------------

FEATURES = (
    "pretoken",
    "long_word",
    "punct_run",
    "cjk_common",
    "cjk_rare",
    "other_letter",
    "astral",
)

OTHER_SCRIPTS_FIT = [
    "Die Größe der Datei überschreitet das zulässige Maximum. Bitte wählen Sie eine kleinere "
    "Datei aus oder komprimieren Sie sie, bevor Sie es erneut versuchen. Für Rückfragen stehen "
    "wir Ihnen gern zur Verfügung.",
    "Le déploiement a échoué à cause d'une erreur de configuration : la variable "
    "d'environnement DATABASE_URL n'était pas définie. Après correction, le service a "
    "redémarré sans problème.",
    "Не удалось подключиться к серверу базы данных. Проверьте, что служба запущена, а "
    "параметры подключения указаны правильно. Повторная попытка будет выполнена через "
    "тридцать секунд.",
    "Η εφαρμογή ενημερώθηκε με επιτυχία. Παρακαλούμε επανεκκινήστε τη συσκευή σας για να "
    "ολοκληρωθεί η εγκατάσταση.",
    "Great job team!! 🎉🎉 The release is out 🚀 and the dashboards look green ✅✅. "
    "Pizza on Friday 🍕😄👍",
]


def _features_row(text: str) -> list[float]:
    f = text_features(text)
    return [
        f.pretokens,
        f.long_words,
        f.punct_runs,
        f.cjk_common,
        f.cjk_rare,
        # The scripts with their own per-letter cost are fitted apart (aiden/policy/tokens.py _SCRIPTS):
        # here they count as the other letters they were before.
        f.other_letters + sum(f.scripts),
        f.astral,
    ]


def _solve(matrix: list[list[float]], vector: list[float]) -> list[float]:
    size = len(vector)
    aug = [[*row, vector[i]] for i, row in enumerate(matrix)]
    for col in range(size):
        pivot = max(range(col, size), key=lambda r: abs(aug[r][col]))
        aug[col], aug[pivot] = aug[pivot], aug[col]
        for r in range(size):
            if r != col and aug[col][col]:
                f = aug[r][col] / aug[col][col]
                aug[r] = [a - f * b for a, b in zip(aug[r], aug[col], strict=True)]
    return [aug[i][size] / aug[i][i] if aug[i][i] else 0.0 for i in range(size)]


def fit_profile(samples: list[tuple[str, str]], counter: Callable[[str], int]) -> dict[str, float]:
    """Least squares of the *relative* error, every kind weighted equally, coefficients >= 0."""
    per_kind: dict[str, int] = {}
    for kind, _ in samples:
        per_kind[kind] = per_kind.get(kind, 0) + 1
    rows = []
    for kind, text in samples:
        truth = counter(text)
        weight = (1 / per_kind[kind]) ** 0.5
        rows.append(([v / truth * weight for v in _features_row(text)], weight))
    active = list(range(len(FEATURES)))
    while True:
        a = [
            [sum(x[i] * x[j] for x, _ in rows) + (1e-9 if i == j else 0) for j in active]
            for i in active
        ]
        b = [sum(x[i] * w for x, w in rows) for i in active]
        solution = _solve(a, b)
        negative = [active[k] for k, v in enumerate(solution) if v < 0]
        if not negative:
            coefficients = dict.fromkeys(FEATURES, 0.0)
            coefficients.update({FEATURES[i]: v for i, v in zip(active, solution, strict=True)})
            return coefficients
        active = [i for i in active if i not in negative]


def run_fit(encodings: dict[str, Any]) -> None:
    corpus = fit_corpus()
    samples = [(kind, t) for kind, texts in corpus.items() for t in texts]
    samples += [("other scripts", t) for t in OTHER_SCRIPTS_FIT]
    fit_random = random_looking(1, PROSE_FIT)
    for name, enc in encodings.items():
        coefficients = fit_profile(samples, functools.partial(true_count, enc))
        body = ",\n".join(f"    {k}={round(v, 3)!r}" for k, v in coefficients.items())
        print(f"{name.upper()} = TokenProfile(\n    name={name!r},\n{body},\n    scripts=<kept>,\n)")
        # The per-script letter costs are not refitted here: the shipped profile's are kept.
        shipped = O200K if name == "o200k" else CL100K
        profile = TokenProfile(name=name, **coefficients, scripts=shipped.scripts)
        # Random-looking stretches are (nearly) absent from the corpus above, so their cost is fitted
        # alone: least squares of the relative error over the texts that are almost all such stretches.
        rows = []
        for text in fit_random:
            f = text_features(text)
            if f.random_chars >= 0.8 * len(text):
                truth = true_count(enc, text)
                rows.append((f.random_chars / truth, f.random_mixes / truth))
        aa = sum(a * a for a, _ in rows)
        ab = sum(a * b for a, b in rows)
        bb = sum(b * b for _, b in rows)
        ya, yb = sum(a for a, _ in rows), sum(b for _, b in rows)
        det = aa * bb - ab * ab
        random_char, random_mix = (ya * bb - yb * ab) / det, (yb * aa - ya * ab) / det
        print(f"    random_char={round(random_char, 3)!r},\n    random_mix={round(random_mix, 3)!r},")
        profile = msgspec.structs.replace(profile, random_char=random_char, random_mix=random_mix)
        for label, data in (("fit", {**corpus, "random-looking": fit_random}), ("validation", validation_corpus())):
            parts = []
            for kind, texts in data.items():
                est = [estimate_tokens(t, profile) for t in texts]
                truth = [true_count(enc, t) for t in texts]
                ratios = [e / t for e, t in zip(est, truth, strict=True)]
                parts.append(
                    f"{kind}: {sum(est) / sum(truth):.3f} ({min(ratios):.2f}-{max(ratios):.2f})"
                )
            print(f"  {label}: " + "; ".join(parts))


def gen_common_cjk(encodings: dict[str, Any]) -> None:
    enc = encodings["cl100k"]
    ranges = (
        (0x2E80, 0x2FFF),
        (0x3000, 0x9FFF),
        (0xAC00, 0xD7AF),
        (0xF900, 0xFAFF),
        (0xFE30, 0xFE4F),
        (0xFF00, 0xFFEF),
    )
    chars = [
        chr(cp)
        for lo, hi in ranges
        for cp in range(lo, hi + 1)
        if chr(cp).isprintable() and len(enc.encode_ordinary(chr(cp))) == 1
    ]
    print(len(chars))
    print("".join(chars))


# --- main ------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--quick", action="store_true", help="fewer repeats, planning up to 10k events"
    )
    parser.add_argument("--fit", action="store_true", help="refit the estimator profiles and exit")
    parser.add_argument(
        "--gen-common-cjk", action="store_true", help="print the common-CJK table and exit"
    )
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "policy.json")
    args = parser.parse_args(argv)

    encodings = load_encodings()
    if args.fit:
        run_fit(encodings)
        return 0
    if args.gen_common_cjk:
        gen_common_cjk(encodings)
        return 0

    repeats = 3 if args.quick else 7
    corpus = validation_corpus()
    corpus.update(real_data_corpus())
    with no_network():
        acc = accuracy(corpus, encodings)
        spd = speed(corpus, encodings, repeats)
    plan = planning((1_000, 10_000) if args.quick else (1_000, 10_000, 100_000), repeats)

    print("## Token estimator accuracy (estimate / real tokens)\n")
    print(
        "Aggregate ratio over all samples of a kind, per-sample range in parentheses. "
        "`ours / X` uses the profile of tokenizer X; `default` is the profile used when the "
        f"model is unknown ({DEFAULT_PROFILE.name}). "
        "Validation texts only (none were used for fitting).\n"
    )
    print(accuracy_table(acc))
    print("\n## Estimator speed (calls per second, median of repeats)\n")
    print(speed_table(spd))
    print("\n## plan_compaction time (median; default Config, target_tokens=16000)\n")
    print(planning_table(plan))

    result = {
        "machine": {"python": sys.version.split()[0], "platform": platform.platform()},
        "quick": args.quick,
        "accuracy": acc,
        "speed": spd,
        "planning": plan,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"\nwrote {args.out.relative_to(ROOT) if args.out.is_relative_to(ROOT) else args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
