CREATE REGION rg_hot (MAX_SIZE=2G, MAX_CHIPS=4, MAX_CHANNELS=2, GC=greedy, OP=10%, IPA_MODE=pSLC);
CREATE TABLESPACE ts_hot (REGION=rg_hot, EXTENT_SIZE=128K);
CREATE TABLE stock (s_i_id INT, s_w_id INT, s_qty INT, PRIMARY KEY (s_w_id, s_i_id)) TABLESPACE ts_hot;
CREATE INDEX st_q ON stock (s_qty);
