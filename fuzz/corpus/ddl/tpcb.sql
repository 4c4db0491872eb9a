CREATE TABLESPACE tpcb;
CREATE TABLE branch (b_id INT, b_balance MONEY, b_filler CHAR(88)) TABLESPACE tpcb;
CREATE TABLE teller (t_id INT, t_b_id INT, t_balance MONEY, t_filler CHAR(84)) TABLESPACE tpcb;
CREATE TABLE account (a_id INT, a_b_id INT, a_balance MONEY, a_filler CHAR(84)) TABLESPACE tpcb;
CREATE TABLE history (h_t_id INT, h_b_id INT, h_a_id INT, h_delta MONEY, h_time BIGINT, h_seq BIGINT, h_filler CHAR(22)) TABLESPACE tpcb;
CREATE UNIQUE INDEX branch_pk ON branch (b_id);
CREATE UNIQUE INDEX teller_pk ON teller (t_id);
CREATE UNIQUE INDEX account_pk ON account (a_id);

