ATTACH TABLE _ UUID '24bb7c79-6e07-4384-a45f-b1f240c58e1c'
(
    `ts` DateTime,
    `user_id` UInt64,
    `url` String,
    INDEX user_bf user_id TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX url_tokens url TYPE tokenbf_v1(512, 3, 0) GRANULARITY 1
)
ENGINE = MergeTree
ORDER BY ts
SETTINGS index_granularity = 1024, min_bytes_for_wide_part = 0
