pub mod cds;
