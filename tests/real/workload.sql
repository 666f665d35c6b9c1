-- sqlite3 workload of the real-program tests: a schema, many rows from
-- recursive CTEs, indexes, joins, aggregates, window functions, updates,
-- deletes, a transaction rolled back; every result is printed.
PRAGMA journal_mode=DELETE;
PRAGMA synchronous=OFF;
CREATE TABLE customer(id INTEGER PRIMARY KEY, name TEXT NOT NULL, city TEXT, born INTEGER);
CREATE TABLE item(id INTEGER PRIMARY KEY, title TEXT, price REAL, tag TEXT);
CREATE TABLE orders(id INTEGER PRIMARY KEY, customer INTEGER REFERENCES customer(id),
                    item INTEGER REFERENCES item(id), qty INTEGER, note TEXT);
BEGIN;
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3000)
INSERT INTO customer SELECT i, 'customer-' || printf('%05d', i),
       CASE i % 7 WHEN 0 THEN 'Oslo' WHEN 1 THEN 'Lyon' WHEN 2 THEN 'Porto' WHEN 3 THEN 'Graz'
                  WHEN 4 THEN 'Turku' WHEN 5 THEN 'Gent' ELSE 'Brno' END,
       1940 + (i * 37) % 70 FROM n;
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 500)
INSERT INTO item SELECT i, 'item ' || hex(i * 2654435761 % 4294967296),
       round(((i * 7919) % 10000) / 100.0, 2), substr('abcdefghij', 1 + i % 10, 1) FROM n;
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 20000)
INSERT INTO orders SELECT i, 1 + (i * 7) % 3000, 1 + (i * 13) % 500, 1 + i % 9,
       CASE WHEN i % 11 = 0 THEN 'gift ' || i ELSE NULL END FROM n;
COMMIT;
CREATE INDEX orders_customer ON orders(customer);
CREATE INDEX orders_item ON orders(item);
CREATE INDEX customer_city ON customer(city, born);
SELECT count(*), sum(qty), min(id), max(id) FROM orders;
SELECT c.city, count(*) AS n, round(sum(o.qty * i.price), 2) AS total
  FROM orders o JOIN customer c ON c.id = o.customer JOIN item i ON i.id = o.item
 GROUP BY c.city ORDER BY total DESC;
SELECT i.tag, count(DISTINCT o.customer), avg(o.qty), group_concat(DISTINCT c.city)
  FROM item i JOIN orders o ON o.item = i.id JOIN customer c ON c.id = o.customer
 WHERE i.price > 50 GROUP BY i.tag ORDER BY i.tag;
SELECT name, born, rank() OVER (PARTITION BY city ORDER BY born, id) AS r
  FROM customer WHERE id % 97 = 0 ORDER BY city, r;
SELECT c.name, sum(o.qty) AS q FROM customer c LEFT JOIN orders o ON o.customer = c.id
 GROUP BY c.id HAVING q > 60 ORDER BY q DESC, c.name LIMIT 15;
SELECT count(*) FROM orders WHERE note LIKE 'gift 1%';
SELECT upper(substr(title, 1, 8)), length(title), printf('%8.2f', price) FROM item
 WHERE id IN (SELECT item FROM orders GROUP BY item ORDER BY count(*) DESC LIMIT 5) ORDER BY id;
UPDATE item SET price = price * 1.1 WHERE tag IN ('a', 'e', 'i');
DELETE FROM orders WHERE qty = 9 AND customer % 5 = 0;
SELECT count(*), round(sum(i.price * o.qty), 2) FROM orders o JOIN item i ON i.id = o.item;
BEGIN;
DELETE FROM orders;
SELECT count(*) FROM orders;
ROLLBACK;
SELECT count(*) FROM orders;
CREATE TABLE summary AS SELECT customer, count(*) AS n, sum(qty) AS q FROM orders GROUP BY customer;
SELECT n, count(*) FROM summary GROUP BY n ORDER BY n;
SELECT json_object('cities', (SELECT json_group_array(city) FROM (SELECT DISTINCT city FROM customer ORDER BY city)));
PRAGMA integrity_check;
